// Passkey sign-in for /login.html (WebAuthn, discoverable credentials). Filled in by passkey support.
