// Tidings dashboard: optional progressive enhancement. Every page works without it.
// Loaded as /assets/dashboard.js under a policy that forbids inline script; no handler
// attributes are used anywhere, so everything is wired up here.
"use strict";

document.addEventListener("DOMContentLoaded", function () {
  // Copy buttons: <button class="copy" data-copy="text">.
  document.querySelectorAll("button.copy[data-copy]").forEach(function (button) {
    button.hidden = false;
    button.addEventListener("click", function () {
      var text = button.getAttribute("data-copy");
      var done = function () {
        var label = button.textContent;
        button.textContent = "Copied";
        setTimeout(function () { button.textContent = label; }, 1500);
      };
      if (navigator.clipboard && navigator.clipboard.writeText) {
        navigator.clipboard.writeText(text).then(done, function () {});
      }
    });
  });

  // "Load remote images": switch the preview frame in place instead of reloading the page.
  var toggle = document.getElementById("load-images");
  var frame = document.getElementById("preview");
  if (toggle && frame) {
    toggle.addEventListener("click", function (event) {
      var src = toggle.getAttribute("data-frame-src");
      if (!src) { return; }
      event.preventDefault();
      frame.setAttribute("src", src);
      toggle.hidden = true;
    });
  }

  // Forms that destroy something ask first: <form data-confirm="question">. On yes the form
  // says so (confirm=yes); without this script the server asks on a page of its own.
  document.querySelectorAll("form[data-confirm]").forEach(function (form) {
    form.addEventListener("submit", function (event) {
      if (!window.confirm(form.getAttribute("data-confirm"))) {
        event.preventDefault();
        return;
      }
      if (!form.querySelector("input[name=confirm]")) {
        var yes = document.createElement("input");
        yes.type = "hidden";
        yes.name = "confirm";
        yes.value = "yes";
        form.appendChild(yes);
      }
    });
  });
});
