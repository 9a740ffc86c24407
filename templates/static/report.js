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
  // Plain Python blocks (past the report's highlighting budget) get coloured here, when opened, with
  // the same classes Pygments uses. Text is taken from textContent and re-escaped, never from HTML.
  var TOKEN = /(#.*$)|((?:[rRbBfFuU]{0,2})(?:'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"))|\b(def|class|return|import|from|as|if|elif|else|for|while|in|is|not|and|or|with|try|except|finally|raise|del|pass|lambda|yield|global|nonlocal|assert|break|continue|async|await)\b|\b(None|True|False)\b|(@[\w.]+)|\b(0[xX][0-9a-fA-F]+|\d+(?:\.\d*)?(?:[eE][+-]?\d+)?)\b/g;
  var CLASSES = [null, "c1", "s2", "k", "kc", "nd", "m"];
  function escapeText(text) {
    return text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  }
  function colourLine(text) {
    var out = "", last = 0, match;
    TOKEN.lastIndex = 0;
    while ((match = TOKEN.exec(text)) !== null) {
      if (match[0].length === 0) { TOKEN.lastIndex++; continue; }
      var group = 1;
      while (match[group] === undefined) group++;
      out += escapeText(text.slice(last, match.index)) + '<span class="' + CLASSES[group] + '">' + escapeText(match[0]) + "</span>";
      last = match.index + match[0].length;
    }
    return out + escapeText(text.slice(last));
  }
  function colour(pre) {
    if (pre.getAttribute("data-coloured")) return;
    pre.setAttribute("data-coloured", "1");
    var lines = pre.children;
    for (var i = 0; i < lines.length && i < 50000; i++) {
      lines[i].innerHTML = colourLine(lines[i].textContent);
    }
  }
  function colourVisible() {
    document.querySelectorAll("pre.code[data-colour]").forEach(function (pre) {
      if (pre.offsetParent !== null) colour(pre);
    });
  }
  document.addEventListener("toggle", colourVisible, true);
  colourVisible();
})();
