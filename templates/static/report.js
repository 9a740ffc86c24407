// tlparse-py: optional niceties; every page reads fine with scripts off.
(function () {
  "use strict";
  // Keep a report's query string (e.g. an artifact server's access token) on relative links,
  // so moving between pages of a hosted report keeps working.
  var query = window.location.search;
  if (query) {
    document.querySelectorAll("a[href]").forEach(function (a) {
      var href = a.getAttribute("href");
      if (!href || /^[a-z][a-z0-9+.-]*:/i.test(href) || href.charAt(0) === "#" || href.indexOf("?") >= 0) return;
      var hash = href.indexOf("#");
      a.setAttribute("href", hash < 0 ? href + query : href.slice(0, hash) + query + href.slice(hash));
    });
  }
  // "Expand all" / "Collapse all" buttons for pages with many collapsible sections.
  document.querySelectorAll("[data-toggle-all]").forEach(function (button) {
    button.hidden = false;
    button.addEventListener("click", function () {
      var open = button.getAttribute("data-toggle-all") === "open";
      var scope = document.querySelector(button.getAttribute("data-scope") || "main");
      scope.querySelectorAll("details").forEach(function (d) { d.open = open; });
    });
  });
  // Opening a page at #L123 (or #anchor inside a collapsed section) reveals it.
  function reveal() {
    var id = decodeURIComponent(window.location.hash.slice(1));
    var target = id && document.getElementById(id);
    for (var node = target; node; node = node.parentElement) {
      if (node.tagName === "DETAILS") node.open = true;
    }
  }
  window.addEventListener("hashchange", reveal);
  reveal();
  // Clicking a line number (drawn by CSS) makes that line the page's address, like a link would.
  document.querySelectorAll("pre.code").forEach(function (pre) {
    pre.addEventListener("click", function (event) {
      var line = event.target;
      if (!line.id || line.parentElement !== pre) return;
      if (event.clientX - line.getBoundingClientRect().left > 70) return;
      window.location.hash = line.id;
    });
  });
})();
