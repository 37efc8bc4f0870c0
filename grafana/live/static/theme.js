// The dashboard's colour scheme, applied before the page paints (loaded in <head> by both pages):
// "light" or "dark" as chosen on the run page (localStorage `rlvitals.theme`), else nothing, and
// live.css follows the system's `prefers-color-scheme`. run.js owns the toggle and redraws the
// charts when the scheme changes.
(function () {
  "use strict";
  let chosen = null;
  try {
    chosen = window.localStorage.getItem("rlvitals.theme");
  } catch (e) {
    chosen = null; // storage refused (a privacy setting): follow the system
  }
  if (chosen === "light" || chosen === "dark") document.documentElement.dataset.theme = chosen;
})();
