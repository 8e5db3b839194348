// Progressive enhancement only: every page works without this script, and every value a copy
// button copies is also shown as selectable text.
(function () {
  "use strict";

  // Copy buttons. Without the clipboard API (a page served over plain HTTP from elsewhere than
  // localhost), the value is selected instead, for the person to copy.
  document.addEventListener("click", function (event) {
    var button = event.target.closest("button.copy");
    if (!button) return;
    var source = document.getElementById(button.dataset.copyFrom);
    if (!source) return;
    var text = source.value !== undefined ? source.value : source.textContent;
    if (!navigator.clipboard) {
      selectText(source);
      return;
    }
    navigator.clipboard.writeText(text.trim()).then(function () {
      var label = button.textContent;
      button.textContent = "Copied";
      setTimeout(function () { button.textContent = label; }, 1500);
    }, function () { selectText(source); });
  });

  function selectText(element) {
    if (element.select) {
      element.select();
      return;
    }
    var range = document.createRange();
    range.selectNodeContents(element);
    var selection = window.getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
  }

  // A second click on a button that is already sending its form would send it again (the server
  // answers a duplicate as it answered the first, but the person waits twice as long). The buttons
  // are disabled only once the submission has started, so the clicked button's own name and value
  // still go with the form; they come back if the page never leaves (a download, a stopped load)
  // or is shown again from the back-forward cache.
  var DISABLED = "data-disabled-while-sending";
  var GIVE_BACK_AFTER_MS = 10000;

  document.addEventListener("submit", function (event) {
    if (event.defaultPrevented) return;
    var buttons = Array.prototype.filter.call(event.target.elements, function (element) {
      return (element.type === "submit" || element.type === "image") && !element.disabled;
    });
    setTimeout(function () {
      buttons.forEach(function (button) {
        button.disabled = true;
        button.setAttribute(DISABLED, "");
      });
    });
    setTimeout(function () { enable(buttons); }, GIVE_BACK_AFTER_MS);
  });

  window.addEventListener("pageshow", function (event) {
    if (event.persisted) enable(document.querySelectorAll("[" + DISABLED + "]"));
  });

  function enable(buttons) {
    Array.prototype.forEach.call(buttons, function (button) {
      if (!button.hasAttribute(DISABLED)) return;
      button.disabled = false;
      button.removeAttribute(DISABLED);
    });
  }

  // A table too wide for a phone scrolls inside its own box: that box then takes keyboard focus
  // (so it scrolls with the arrow keys) and says what it is. Boxes that fit stay out of the tab order.
  function markScrollers() {
    document.querySelectorAll("div.table-scroll, pre").forEach(function (box) {
      var scrolls = box.scrollWidth > box.clientWidth;
      if (scrolls && !box.hasAttribute("tabindex")) {
        var caption = box.querySelector("caption");
        box.tabIndex = 0;
        box.setAttribute("role", "region");
        box.setAttribute("aria-label", (caption ? caption.textContent.trim() : box.tagName === "PRE" ? "Code" : "Table") + ", scrolls sideways");
        box.setAttribute("data-scroller", "");
      } else if (!scrolls && box.hasAttribute("data-scroller")) {
        ["tabindex", "role", "aria-label", "data-scroller"].forEach(function (name) { box.removeAttribute(name); });
      }
    });
  }

  var pending = false;
  function markScrollersSoon() {
    if (pending) return;
    pending = true;
    window.requestAnimationFrame(function () {
      pending = false;
      markScrollers();
    });
  }

  markScrollers();
  window.addEventListener("resize", markScrollersSoon);
  document.addEventListener("toggle", markScrollersSoon, true); // a <details> opened: its content has a width now
})();
