// "Sign in with your EU wallet" on /login.html (plugins/wallet-verifier). No framework, no inline
// script (the page's CSP): starts a presentation session bound to a secret only this page holds,
// shows its deep link as a QR code (cross-device) and a link (same-device), polls the result and,
// once the wallet's PID is verified, completes the sign-in and follows the redirect.
(function () {
  'use strict';
  var box = document.getElementById('wallet-signin');
  if (!box) return;
  var btn = document.getElementById('wallet-signin-start');
  var status = document.getElementById('wallet-signin-status');
  function say(t) { status.textContent = t; }
  function json(r) {
    return r.json().then(function (j) {
      if (!r.ok) throw new Error(j.error_description || j.error || String(r.status));
      return j;
    });
  }
  function post(url, body) {
    return fetch(url, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body), credentials: 'same-origin' }).then(json);
  }
  function failed(e) {
    say('Wallet sign-in failed: ' + e.message);
    btn.disabled = false;
  }
  btn.addEventListener('click', function () {
    btn.disabled = true;
    say('Preparing the wallet request…');
    post('/oidc.ashx/wallet-login/start', { i: box.getAttribute('data-i') || '' }).then(function (s) {
      document.getElementById('wallet-signin-qr').src = s.qr_svg;
      document.getElementById('wallet-signin-link').href = s.openid4vp_url;
      document.getElementById('wallet-signin-box').hidden = false;
      say('Waiting for your wallet…');
      var deadline = Date.now() + s.expires_in * 1000;
      function poll() {
        fetch('/oidc.ashx?action=vp-result&session_id=' + encodeURIComponent(s.session_id), { credentials: 'same-origin' })
          .then(json)
          .then(function (j) {
            if (j.status === 'verified') {
              say('Verified. Signing you in…');
              return post('/oidc.ashx/wallet-login/complete', { session_id: s.session_id, login_secret: s.login_secret }).then(function (c) {
                window.location.assign(c.redirect);
              });
            }
            if (j.status !== 'pending') throw new Error(j.error_description || 'the presentation was not accepted');
            if (Date.now() > deadline) throw new Error('the request expired, start again');
            setTimeout(poll, 1000);
          })
          .catch(failed);
      }
      poll();
    }, failed);
  });
})();
