"""Views: pure functions from the analysis to the plain values each page template shows."""
