// The portal's only script: copy buttons, delete confirmations and the
// endpoint form's event-type choice kept consistent. Pages work without it.
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

// Checking an event type chooses "only those checked"; choosing "all"
// unchecks them.
document.addEventListener("change", (ev) => {
  const t = ev.target;
  const form = t.form;
  if (!form) {
    return;
  }
  if (t.name === "event_types" && t.checked) {
    const some = form.querySelector('input[name="subscribe"][value="some"]');
    if (some) {
      some.checked = true;
    }
  }
  if (t.name === "subscribe" && t.value === "all" && t.checked) {
    form.querySelectorAll('input[name="event_types"]').forEach((box) => { box.checked = false; });
  }
});
