// The login page: posts the credential, then opens the dashboard. A link of
// the form /login#credential=... logs in at once (the part after '#' never
// reaches the server or its logs; it is removed from the address bar).
"use strict";

async function logIn(credential) {
  const error = document.getElementById("login-error");
  error.textContent = "";
  let response;
  try {
    response = await fetch("/api/login", {
      method: "POST",
      headers: {"Content-Type": "text/plain"},
      body: credential,
      credentials: "same-origin",
    });
  } catch (e) {
    error.textContent = "the head did not answer: " + e;
    return;
  }
  if (response.status === 204) {
    window.location.replace("/");
  } else {
    error.textContent = (await response.text()).trim();
  }
}

document.addEventListener("DOMContentLoaded", () => {
  document.getElementById("login-form").addEventListener("submit", (event) => {
    event.preventDefault();
    logIn(document.getElementById("credential").value.trim());
  });
  const prefix = "#credential=";
  if (window.location.hash.startsWith(prefix)) {
    const credential = decodeURIComponent(window.location.hash.slice(prefix.length));
    history.replaceState(null, "", "/login");
    logIn(credential);
  }
});
