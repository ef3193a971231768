// Tidings dashboard: optional progressive enhancement. Every page works without it.
// Loaded as /assets/dashboard.js under a policy that forbids inline script; no handler
// attributes are used anywhere, so everything is wired up here.
"use strict";

document.addEventListener("DOMContentLoaded", function () {
  // Copy buttons: <button class="copy" data-copy="text">, or data-copy-from="#id" to copy
  // that element's text (a message's source, too long for an attribute).
  document.querySelectorAll("button.copy[data-copy], button.copy[data-copy-from]").forEach(function (button) {
    button.hidden = false;
    button.addEventListener("click", function () {
      var from = button.getAttribute("data-copy-from");
      var source = from ? document.querySelector(from) : null;
      var text = source ? source.textContent : button.getAttribute("data-copy");
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

  // A message in flight: poll its progress every few seconds (for ten minutes at most) and,
  // when an event comes in, show its new status and offer to reload for the timeline.
  var live = document.getElementById("live");
  if (live && window.fetch) {
    var url = live.getAttribute("data-watch");
    var last = live.getAttribute("data-last-event");
    var polls = 0;
    live.hidden = false;
    var poll = function () {
      polls += 1;
      fetch(url, { credentials: "same-origin", cache: "no-store" })
        .then(function (response) { return response.ok ? response.json() : null; })
        .then(function (progress) {
          if (progress && progress.lastEventId !== last) {
            var status = document.getElementById("status");
            if (status) {
              status.setAttribute("data-status", progress.status);
              var badge = status.querySelector(".badge");
              if (badge) {
                badge.textContent = progress.status;
                badge.className = "badge " + progress.kind;
              }
            }
            live.textContent = "";
            var link = document.createElement("a");
            link.href = window.location.pathname + window.location.search;
            link.id = "live-reload";
            link.textContent = "Now " + progress.status + ": reload to see the timeline";
            live.appendChild(link);
            live.setAttribute("role", "status");
            last = progress.lastEventId;
            if (progress.settled) { return; }
          }
          if (polls < 200) { setTimeout(poll, 3000); } else { live.textContent = "Stopped watching: reload to see changes."; }
        }, function () { live.textContent = "Stopped watching: reload to see changes."; });
    };
    setTimeout(poll, 3000);
  }

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
