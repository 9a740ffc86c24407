// tlparse-py provenance highlighter: pre-grad graph <-> post-grad graph <-> generated code.
(function () {
  "use strict";
  var data = document.getElementById("lineMappings");
  var panes = document.querySelector(".provenance-panes");
  if (!data || !panes) return;
  var maps = JSON.parse(data.textContent || "{}");
  var cpp = panes.getAttribute("data-code-kind") === "cpp";
  var offset = parseInt(panes.getAttribute("data-code-offset") || "0", 10);
  var pre = document.getElementById("preGradGraph");
  var post = document.getElementById("postGradGraph");
  var code = document.getElementById("generatedCode");
  var codeToPost = (cpp ? maps.cppCodeToPost : maps.pyCodeToPost) || {};
  var postToCode = (cpp ? maps.postToCppCode : maps.postToPyCode) || {};
  var preToPost = maps.preToPost || {};
  var postToPre = maps.postToPre || {};

  // mapping numbers count code lines from tlparse's base line; our pane shows every line
  function codeLine(n) { return code.querySelector('.pl[data-n="' + (n + offset) + '"]'); }
  function line(pane, n) { return pane === code ? codeLine(n) : pane.querySelector('.pl[data-n="' + n + '"]'); }
  function number(pane, el) { var n = parseInt(el.getAttribute("data-n"), 10); return pane === code ? n - offset : n; }

  function mark(pane, table) {
    Object.keys(table).forEach(function (n) { var el = line(pane, parseInt(n, 10)); if (el) el.classList.add("mapped"); });
  }
  mark(pre, preToPost); mark(post, postToPre); mark(post, postToCode); mark(code, codeToPost);

  function clear() {
    document.querySelectorAll(".pl.hl").forEach(function (el) { el.classList.remove("hl"); });
  }
  function light(pane, numbers, scroll) {
    (numbers || []).forEach(function (n, i) {
      var el = line(pane, n);
      if (!el) return;
      el.classList.add("hl");
      if (scroll && i === 0) pane.scrollTop = el.offsetTop - pane.offsetTop - pane.clientHeight / 3;
    });
  }
  function show(pane, el, scroll) {
    var n = String(number(pane, el));
    clear();
    el.classList.add("hl");
    if (pane === pre) {
      var posts = preToPost[n] || [];
      light(post, posts, scroll);
      posts.forEach(function (p) { light(code, postToCode[String(p)], scroll); });
    } else if (pane === post) {
      light(pre, postToPre[n], scroll);
      light(code, postToCode[n], scroll);
    } else {
      var targets = codeToPost[n] || [];
      light(post, targets, scroll);
      targets.forEach(function (p) { light(pre, postToPre[String(p)], scroll); });
    }
  }
  [pre, post, code].forEach(function (pane) {
    pane.addEventListener("mouseover", function (e) { var el = e.target.closest(".pl"); if (el) show(pane, el, false); });
    pane.addEventListener("click", function (e) { var el = e.target.closest(".pl"); if (el) show(pane, el, true); });
  });
})();
