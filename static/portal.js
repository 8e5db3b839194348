// Progressive enhancement only: every page works without this script, and every value a copy
// button copies is also shown as selectable text. No framework: a few listeners.
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
        if (box.tagName !== "PRE") {  // a table's hidden columns are said in words too, above it
          var hint = document.createElement("p");
          hint.className = "scroll-hint";
          hint.setAttribute("aria-hidden", "true");  // the box's own label says it to screen readers
          hint.textContent = "More columns: scroll the table sideways \u2192";
          box.parentNode.insertBefore(hint, box);
        }
      } else if (!scrolls && box.hasAttribute("data-scroller")) {
        ["tabindex", "role", "aria-label", "data-scroller"].forEach(function (name) { box.removeAttribute(name); });
        var previous = box.previousElementSibling;
        if (previous && previous.className === "scroll-hint") previous.remove();
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

  // A domain waiting on a background check: its status refreshes without a reload. The server
  // marks the part to poll with data-poll (its address) and data-poll-after (the seconds until
  // the next check) only while something waits; the answer is the page's data-live parts again,
  // which replace these by id. Polls come just after each check, back off while a check is late,
  // pause while the page is hidden, and stop once nothing waits, or on any answer but 200.
  var FIRST_MS = 3000, LATE_MAX_MS = 60000, AHEAD_MAX_MS = 300000, AFTER_CHECK_MS = 1500;
  var late = FIRST_MS;
  var pollTimer = null, polling = false, stopped = false;

  function schedulePoll() {
    var box = document.querySelector("[data-poll]");
    if (!box) return;
    var after = parseInt(box.getAttribute("data-poll-after"), 10) * 1000;
    var wait;
    if (after > 0) {
      wait = Math.min(after + AFTER_CHECK_MS, AHEAD_MAX_MS);
      late = FIRST_MS;
    } else {
      wait = late;
      late = Math.min(late * 1.5, LATE_MAX_MS);
    }
    pollTimer = setTimeout(poll, wait);
  }

  function poll() {
    pollTimer = null;
    if (document.hidden || stopped) return;  // a hidden page resumes on visibilitychange
    var box = document.querySelector("[data-poll]");
    if (!box) return;
    polling = true;
    fetch(box.getAttribute("data-poll"), {credentials: "same-origin", headers: {"Accept": "text/html"}})
      .then(function (response) {
        if (!response.ok || response.redirected) throw new Error("status " + response.status);
        return response.text();
      })
      .then(function (text) {
        var fresh = new DOMParser().parseFromString(text, "text/html");
        var changed = false;
        fresh.querySelectorAll("[data-live]").forEach(function (part) {
          var here = document.getElementById(part.id);
          if (!here) return;
          ["data-poll", "data-poll-after"].forEach(function (name) {
            if (part.hasAttribute(name)) here.setAttribute(name, part.getAttribute(name));
            else here.removeAttribute(name);
          });
          if (here.innerHTML !== part.innerHTML) {
            here.replaceChildren.apply(here, Array.prototype.slice.call(part.childNodes));
            changed = true;
          }
        });
        // The page's message about the last action ("issuing...") told where things stood then:
        // once they have moved on, it would contradict the parts just refreshed.
        if (changed) document.querySelectorAll("main > p.flash").forEach(function (flash) { flash.remove(); });
        polling = false;
        schedulePoll();
      })
      .catch(function () { stopped = true; });  // signed out, gone, rate-limited: the page stays as it is
  }

  document.addEventListener("visibilitychange", function () {
    if (!document.hidden && pollTimer === null && !polling) poll();
  });
  schedulePoll();
})();
