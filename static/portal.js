// Copy buttons: progressive enhancement only; every value is also shown as selectable text.
document.addEventListener("click", function (event) {
  var button = event.target.closest("button.copy");
  if (!button) return;
  var source = document.getElementById(button.dataset.copyFrom);
  var text = source.value !== undefined ? source.value : source.textContent;
  navigator.clipboard.writeText(text.trim()).then(function () {
    var label = button.textContent;
    button.textContent = "Copied";
    setTimeout(function () { button.textContent = label; }, 1500);
  });
});
