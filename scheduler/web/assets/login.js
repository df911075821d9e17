// The login page: posts the credential, then opens the dashboard. A link of
// the form /login#credential=...[&job=ID] logs in at once (the part after '#'
// never reaches the server or its logs; it is removed from the address bar).
"use strict";

// What the dashboard opens after the login: "#job=ID" from a link
// /login#credential=...&job=ID (the job whose output it shows).
let next = "";

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
    window.location.replace("/" + next);
  } else {
    error.textContent = (await response.text()).trim();
  }
}

document.addEventListener("DOMContentLoaded", () => {
  document.getElementById("login-form").addEventListener("submit", (event) => {
    event.preventDefault();
    logIn(document.getElementById("credential").value.trim());
  });
  const params = new URLSearchParams(window.location.hash.slice(1));
  if (params.has("job")) next = "#job=" + encodeURIComponent(params.get("job"));
  if (params.has("credential")) {
    const credential = params.get("credential");
    history.replaceState(null, "", "/login");
    logIn(credential);
  }
});
