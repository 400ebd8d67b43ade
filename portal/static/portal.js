// The portal's only script: copy buttons and delete confirmations. Pages
// work without it.
document.addEventListener("click", (ev) => {
  const copy = ev.target.closest("[data-copy]");
  if (copy) {
    const text = document.getElementById(copy.dataset.copy).textContent;
    navigator.clipboard.writeText(text).then(() => { copy.textContent = "Copied"; });
  }
  const confirmer = ev.target.closest("[data-confirm]");
  if (confirmer && !window.confirm(confirmer.dataset.confirm)) {
    ev.preventDefault();
  }
  const back = ev.target.closest("[data-back]");
  if (back) {
    ev.preventDefault();
    history.back();
  }
});
