// Passkeys for the sign-in pages (WebAuthn Level 3, discoverable credentials). No framework:
// the server sends JSON options (base64url fields), this converts them for navigator.credentials.
(function () {
  'use strict';
  var status = document.getElementById('passkey-status');
  function say(t) { if (status) status.textContent = t; }
  // The page's words in its language, from the status line's data attributes (English when absent).
  function word(name, fallback) { return (status && status.getAttribute('data-' + name)) || fallback; }
  function b64uToBuf(s) {
    var b = atob(s.replace(/-/g, '+').replace(/_/g, '/') + '==='.slice((s.length + 3) % 4));
    var a = new Uint8Array(b.length);
    for (var i = 0; i < b.length; i++) a[i] = b.charCodeAt(i);
    return a.buffer;
  }
  function bufToB64u(buf) {
    var a = new Uint8Array(buf), s = '';
    for (var b of a) s += String.fromCharCode(b);
    return btoa(s).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
  }
  function post(url, body) {
    return fetch(url, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body), credentials: 'same-origin' })
      .then(function (r) { return r.json().then(function (j) { if (!r.ok) throw new Error(j.error_description || j.error || r.status); return j; }); });
  }
  var signin = document.getElementById('passkey-signin');
  if (signin) {
    if (!window.PublicKeyCredential) { signin.hidden = true; return; }
    signin.addEventListener('click', function () {
      var i = signin.getAttribute('data-i') || undefined, csrf = signin.getAttribute('data-csrf');
      say(word('waiting', 'Waiting for your passkey…'));
      post('/oidc.ashx/passkey/options', { i: i, csrf: csrf }).then(function (o) {
        return navigator.credentials.get({ publicKey: { challenge: b64uToBuf(o.challenge), rpId: o.rpId, timeout: o.timeout, userVerification: o.userVerification, allowCredentials: [] } });
      }).then(function (c) {
        var r = c.response;
        return post('/oidc.ashx/passkey/verify', { i: i, csrf: csrf, response: {
          id: c.id, rawId: bufToB64u(c.rawId), type: c.type, clientExtensionResults: c.getClientExtensionResults(),
          response: { clientDataJSON: bufToB64u(r.clientDataJSON), authenticatorData: bufToB64u(r.authenticatorData), signature: bufToB64u(r.signature), userHandle: r.userHandle ? bufToB64u(r.userHandle) : undefined },
        } });
      }).then(function (j) { window.location.assign(j.redirect); }, function (e) { say(word('signin-failed', 'Passkey sign-in failed:') + ' ' + e.message); });
    });
  }
  var reg = document.getElementById('passkey-register');
  if (reg) {
    reg.addEventListener('click', function () {
      var csrf = reg.getAttribute('data-csrf');
      say(word('follow', 'Follow your device to create the passkey…'));
      post('/oidc.ashx/passkey/register-options', { csrf: csrf }).then(function (o) {
        return navigator.credentials.create({ publicKey: {
          challenge: b64uToBuf(o.challenge), rp: o.rp, user: { id: b64uToBuf(o.user.id), name: o.user.name, displayName: o.user.displayName },
          pubKeyCredParams: o.pubKeyCredParams, timeout: o.timeout, attestation: o.attestation, authenticatorSelection: o.authenticatorSelection,
          excludeCredentials: (o.excludeCredentials || []).map(function (x) { return { id: b64uToBuf(x.id), type: 'public-key', transports: x.transports }; }),
        } });
      }).then(function (c) {
        var r = c.response;
        return post('/oidc.ashx/passkey/register', { csrf: csrf, response: {
          id: c.id, rawId: bufToB64u(c.rawId), type: c.type, clientExtensionResults: c.getClientExtensionResults(),
          response: { clientDataJSON: bufToB64u(r.clientDataJSON), attestationObject: bufToB64u(r.attestationObject), transports: r.getTransports ? r.getTransports() : [] },
        } });
      }).then(function () {
        var n = document.getElementById('passkey-count');
        if (n) n.textContent = String(Number(n.textContent) + 1);
        say(word('registered', 'Passkey registered.'));
      }, function (e) { say(word('register-failed', 'Registration failed:') + ' ' + e.message); });
    });
  }
})();
