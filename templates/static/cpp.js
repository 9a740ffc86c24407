// tlparse-py: C++ colouring for Inductor's CPU kernels, the C++ that CPU output code holds inside Python
// string literals (`async_compile.cpp_pybinding([...], r'''...''')`). report.js colours plain Python
// blocks (past the report's highlighting budget) line by line; it asks window.tlparseColourer for a
// colourer per block, which sends kernel lines here (tokenised by report.js's line colourer). Same classes as Pygments' CppLexer. Text is taken
// from textContent and re-escaped, never from HTML.
(function () {
  "use strict";
  var OPEN = /async_compile\.cpp(?:_pybinding)?\((?:(?!''')[^)])*?([rR]?''')/;
  var KEYWORDS = "alignas|alignof|asm|auto|break|case|catch|class|const|const_cast|consteval|constexpr|constinit|continue|" +
    "decltype|default|delete|do|dynamic_cast|else|enum|explicit|export|extern|for|friend|goto|if|mutable|new|noexcept|" +
    "operator|private|protected|public|register|reinterpret_cast|restrict|return|sizeof|static|static_assert|static_cast|" +
    "switch|template|this|throw|try|typedef|typeid|typename|union|using|virtual|volatile|while";
  var TYPES = "bool|char|char16_t|char32_t|char8_t|double|float|int|int8_t|int16_t|int32_t|int64_t|long|ptrdiff_t|short|" +
    "signed|size_t|ssize_t|uint8_t|uint16_t|uint32_t|uint64_t|unsigned|void|wchar_t";
  var TOKEN = new RegExp(
    "(//.*$)|(/\\*.*?(?:\\*/|$))|^(\\s*#.*$)|(\"(?:[^\"\\\\]|\\\\.)*\"?)|('(?:[^'\\\\]|\\\\.)+')|" +
    "\\b(" + KEYWORDS + ")\\b|\\b(" + TYPES + ")\\b|\\b(true|false|nullptr|NULL)\\b|" +
    "\\b(0[xX][0-9a-fA-F]+[uUlL]*|\\d+(?:\\.\\d*)?(?:[eE][+-]?\\d+)?[fFuUlL]*)", "g");
  var CLASSES = [null, "c1", "cm", "cp", "s", "sc", "k", "kt", "nb", "m"];
  // A line colourer for one block, in line order: Python through `python`, kernel literals as C++.
  window.tlparseColourer = function (python) {
    var cppLine = window.tlparseLineColourer(TOKEN, CLASSES), escapeText = window.tlparseEscape;  // report.js
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
          var match = OPEN.exec(text);
          if (!match) return out + python(text);
          var end = match.index + match[0].length;
          out += python(text.slice(0, end - match[1].length)) + '<span class="sd">' + escapeText(match[1]) + "</span>";
          text = text.slice(end);
          inside = true;
        }
      }
    };
  };
})();
