// Corral console: the Overview's refresh and the new key's copy button.
// No framework, no inline script (the CSP forbids it), and nothing from
// the network is ever parsed as markup except the console's own
// server-rendered, auto-escaped fragment of the Overview.
"use strict";

(function () {
  var REFRESH_MS = 5000;
  var refreshes = 0;
  var busy = false; // a refresh is in flight: no second one starts

  // refresh replaces the Overview's live section with a fresh copy from
  // /console/live. A signed-out session reloads the page (to the sign-in).
  // One at a time: when the gateway is slow to answer, ticks are skipped
  // rather than piling requests onto it.
  function refresh() {
    var live = document.getElementById("live");
    var status = document.getElementById("refresh-status");
    if (!live || busy) return;
    busy = true;
    fetch("/console/live", { credentials: "same-origin", cache: "no-store" }).then(function (resp) {
      if (resp.status === 401) { window.location.reload(); return null; }
      if (!resp.ok) throw new Error("status " + resp.status);
      return resp.text();
    }).then(function (text) {
      if (text === null) return;
      var doc = new DOMParser().parseFromString(text, "text/html");
      var fresh = doc.getElementById("live");
      if (!fresh) throw new Error("no live section");
      live.replaceWith(document.importNode(fresh, true));
      refreshes++;
      document.body.setAttribute("data-refreshes", String(refreshes));
      if (status) status.textContent = "Updated " + new Date().toLocaleTimeString() + "; refreshes every 5 seconds.";
    }).catch(function () {
      if (status) status.textContent = "Could not refresh; retrying.";
    }).finally(function () { busy = false; });
  }

  // copyKey copies the new key: the Clipboard API where the page may use
  // it, else the text is selected for the visitor to copy.
  function copyKey(button) {
    var input = document.getElementById(button.getAttribute("data-copy"));
    var status = document.getElementById("copy-status");
    if (!input) return;
    function selected(msg) {
      input.focus();
      input.select();
      if (status) status.textContent = msg;
    }
    if (navigator.clipboard && navigator.clipboard.writeText) {
      navigator.clipboard.writeText(input.value).then(function () {
        button.textContent = "Copied";
        if (status) status.textContent = "The key is on the clipboard.";
      }, function () { selected("Selected: press Ctrl+C (⌘C) to copy."); });
    } else {
      selected("Selected: press Ctrl+C (⌘C) to copy.");
    }
  }

  document.addEventListener("DOMContentLoaded", function () {
    if (document.getElementById("live")) window.setInterval(refresh, REFRESH_MS);
    var now = document.getElementById("refresh-now");
    if (now) now.addEventListener("click", refresh);
    var buttons = document.querySelectorAll("button.copy");
    for (var i = 0; i < buttons.length; i++) {
      buttons[i].addEventListener("click", function (ev) { copyKey(ev.currentTarget); });
    }
  });
})();
