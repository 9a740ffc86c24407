// tlparse-py: code colouring in the page. The report writes code as escaped text with line anchors
// (`<pre class="code" data-colour="python">`); this script colours a block the first time it is seen
// (a section opened, a page shown), with the classes Pygments uses, so pygments.css colours both.
// Text is taken from textContent and re-escaped, never from HTML. Languages: python (Inductor's CPU
// output code holds C++ kernels in string literals: those lines are coloured as C++), cpp, json, diff.
(function () {
  "use strict";
  var MAX_LINES = 50000;  // a bigger block stays plain past this line: colouring must not freeze the tab

  function escapeText(text) {
    return text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  }
  // A line colourer from one regex whose groups are token kinds (classes[n] for group n).
  function lineColourer(token, classes) {
    return function (text) {
      var out = "", last = 0, match;
      token.lastIndex = 0;
      while ((match = token.exec(text)) !== null) {
        if (match[0].length === 0) { token.lastIndex++; continue; }
        var group = 1;
        while (match[group] === undefined) group++;
        out += escapeText(text.slice(last, match.index)) + '<span class="' + classes[group] + '">' + escapeText(match[0]) + "</span>";
        last = match.index + match[0].length;
      }
      return out + escapeText(text.slice(last));
    };
  }

  var PY_KEYWORDS = "def|class|return|import|from|as|if|elif|else|for|while|in|is|not|and|or|with|try|except|finally|" +
    "raise|del|pass|lambda|yield|global|nonlocal|assert|break|continue|async|await";
  var PY_BUILTINS = "abs|all|any|bool|dict|enumerate|float|getattr|hasattr|int|isinstance|len|list|max|min|object|print|" +
    "range|repr|set|setattr|slice|sorted|str|sum|super|tuple|type|zip";
  var PYTHON = new RegExp(
    "(#.*$)|((?:[rRbBfFuU]{0,2})(?:'''.*?(?:'''|$)|\"\"\".*?(?:\"\"\"|$)|'(?:[^'\\\\]|\\\\.)*'|\"(?:[^\"\\\\]|\\\\.)*\"))|" +
    "(?<=\\bdef\\s+)([A-Za-z_]\\w*)|(?<=\\bclass\\s+)([A-Za-z_]\\w*)|\\b(" + PY_KEYWORDS + ")\\b|\\b(None|True|False)\\b|" +
    "\\b(self|cls)\\b|(?<![.\\w])(" + PY_BUILTINS + ")\\b(?=\\()|(@[\\w.]+)|" +
    "\\b(0[xX][0-9a-fA-F]+|\\d+(?:\\.\\d*)?(?:[eE][+-]?\\d+)?)\\b", "g");
  var PYTHON_CLASSES = [null, "c1", "s2", "nf", "nc", "k", "kc", "bp", "nb", "nd", "m"];

  var CPP_KEYWORDS = "alignas|alignof|asm|auto|break|case|catch|class|const|const_cast|consteval|constexpr|constinit|continue|" +
    "decltype|default|delete|do|dynamic_cast|else|enum|explicit|export|extern|for|friend|goto|if|mutable|new|noexcept|" +
    "operator|private|protected|public|register|reinterpret_cast|restrict|return|sizeof|static|static_assert|static_cast|" +
    "switch|template|this|throw|try|typedef|typeid|typename|union|using|virtual|volatile|while";
  var CPP_TYPES = "bool|char|char16_t|char32_t|char8_t|double|float|int|int8_t|int16_t|int32_t|int64_t|long|ptrdiff_t|short|" +
    "signed|size_t|ssize_t|uint8_t|uint16_t|uint32_t|uint64_t|unsigned|void|wchar_t";
  var CPP = new RegExp(
    "(//.*$)|(/\\*.*?(?:\\*/|$))|^(\\s*#.*$)|(\"(?:[^\"\\\\]|\\\\.)*\"?)|('(?:[^'\\\\]|\\\\.)+')|" +
    "\\b(" + CPP_KEYWORDS + ")\\b|\\b(" + CPP_TYPES + ")\\b|\\b(true|false|nullptr|NULL)\\b|" +
    "\\b(0[xX][0-9a-fA-F]+[uUlL]*|\\d+(?:\\.\\d*)?(?:[eE][+-]?\\d+)?[fFuUlL]*)", "g");
  var CPP_CLASSES = [null, "c1", "cm", "cp", "s", "sc", "k", "kt", "nb", "m"];

  // Pygments' JsonLexer: keys are Name.Tag (nt), other strings String.Double (s2).
  var JSON_TOKEN = /("(?:[^"\\]|\\.)*")(?=\s*:)|("(?:[^"\\]|\\.)*")|\b(true|false|null)\b|(-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)/g;
  var JSON_CLASSES = [null, "nt", "s2", "kc", "m"];

  // Pygments' DiffLexer: a whole line is one token.
  var DIFF = /^(\+.*)|^(-.*)|^(@.*)|^((?:[Ii]ndex|diff|=).*)|^(!.*)/g;
  var DIFF_CLASSES = [null, "gi", "gd", "gu", "gh", "gs"];

  var pythonLine = lineColourer(PYTHON, PYTHON_CLASSES), cppLine = lineColourer(CPP, CPP_CLASSES);
  var KERNEL_OPEN = /async_compile\.cpp(?:_pybinding)?\((?:(?!''')[^)])*?([rR]?''')/;

  // Python output code, in line order: kernel literals (`async_compile.cpp_pybinding([...], r'''...''')`) as C++.
  function pythonColourer() {
    var inside = false;
    return function (text) {
      var out = "";
      for (;;) {
        if (inside) {
          var close = text.indexOf("'''");
          if (close < 0) return out + cppLine(text);
          out += cppLine(text.slice(0, close)) + '<span class="sd">\'\'\'</span>';
          text = text.slice(close + 3);
          inside = false;
        } else {
          var match = KERNEL_OPEN.exec(text);
          if (!match) return out + pythonLine(text);
          var end = match.index + match[0].length;
          out += pythonLine(text.slice(0, end - match[1].length)) + '<span class="sd">' + escapeText(match[1]) + "</span>";
          text = text.slice(end);
          inside = true;
        }
      }
    };
  }
  var COLOURERS = {
    python: pythonColourer,
    cpp: function () { return cppLine; },
    json: function () { return lineColourer(JSON_TOKEN, JSON_CLASSES); },
    diff: function () { return lineColourer(DIFF, DIFF_CLASSES); }
  };

  function colour(pre) {
    if (pre.hasAttribute("data-coloured")) return;
    pre.setAttribute("data-coloured", "");
    var make = COLOURERS[pre.getAttribute("data-colour")];
    if (!make) return;
    var line = make(), lines = pre.children;
    for (var i = 0; i < lines.length && i < MAX_LINES; i++) {
      var text = lines[i].textContent;
      if (text) lines[i].innerHTML = line(text);
    }
  }
  function colourVisible() {
    document.querySelectorAll("pre.code[data-colour]:not([data-coloured])").forEach(function (pre) {
      // shown: laid out (not in a hidden page of a single-file report) and in no closed section
      if (pre.offsetParent !== null && !pre.closest("details:not([open])")) colour(pre);
    });
  }
  window.tlparseColourVisible = colourVisible;
  document.addEventListener("toggle", colourVisible, true);
  window.addEventListener("hashchange", colourVisible);
  colourVisible();
})();
