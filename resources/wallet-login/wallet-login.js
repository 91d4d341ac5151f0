// "Sign in with your EU wallet" on /login.html (plugins/wallet-verifier). No framework, no inline
// script (the page's CSP): starts a presentation session bound to a secret only this page holds,
// shows its deep link as a QR code (cross-device) and a link (same-device), polls the result and,
// once the wallet's PID is verified, shows whose it is and completes the sign-in when the person
// confirms. Same-device, the wallet's redirect signs this browser in by itself (wallet-login/return).
(function () {
  'use strict';
  var box = document.getElementById('wallet-signin');
  if (!box) return;
  var btn = document.getElementById('wallet-signin-start');
  var status = document.getElementById('wallet-signin-status');
  function say(t) { status.textContent = t; }
  // The page's words for the status lines (data-t-<key> on the block, in the page's language).
  function w(k, fallback) { return box.getAttribute('data-t-' + k) || fallback; }
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
    say(w('failed', 'Wallet sign-in failed:') + ' ' + e.message);
    btn.disabled = false;
  }
  btn.addEventListener('click', function () {
    btn.disabled = true;
    say(w('preparing', 'Preparing the wallet request…'));
    post('/oidc.ashx/wallet-login/start', { i: box.getAttribute('data-i') || '' }).then(function (s) {
      document.getElementById('wallet-signin-qr').src = s.qr_svg;
      document.getElementById('wallet-signin-link').href = s.openid4vp_url;
      document.getElementById('wallet-signin-box').hidden = false;
      say(w('waiting', 'Waiting for your wallet…'));
      var deadline = Date.now() + s.expires_in * 1000;
      var creds = { session_id: s.session_id, login_secret: s.login_secret };
      // Whoever saw the QR code could have presented their own PID: show whose it is and let the
      // person confirm before this browser is signed in (OpenID4VP 1.0 §13, cross-device).
      function confirmName() {
        return post('/oidc.ashx/wallet-login/review', creds).then(function (r) {
          var cont = document.getElementById('wallet-signin-continue');
          document.getElementById('wallet-signin-name').textContent = r.name || r.account;
          document.getElementById('wallet-signin-account').textContent = r.account;
          cont.textContent = w('continueAs', 'Continue as') + ' ' + (r.name || r.account);
          document.getElementById('wallet-signin-box').hidden = true;
          document.getElementById('wallet-signin-confirm').hidden = false;
          say(w('isThisYou', 'Is this you?'));
          cont.onclick = function () {
            stopped = true;
            cont.disabled = true;
            say(w('signingIn', 'Signing you in…'));
            post('/oidc.ashx/wallet-login/complete', creds).then(function (c) {
              window.location.assign(c.redirect);
            }, failed);
          };
          document.getElementById('wallet-signin-cancel').onclick = function () {
            stopped = true;
            document.getElementById('wallet-signin-confirm').hidden = true;
            say(w('cancelled', 'Not signed in. Start again to present your own wallet.'));
            btn.disabled = false;
          };
        });
      }
      var reviewing = false;
      var stopped = false;
      function poll() {
        if (stopped) return;
        fetch('/oidc.ashx?action=vp-result&session_id=' + encodeURIComponent(s.session_id), { credentials: 'same-origin' })
          .then(json)
          .then(function (j) {
            if (j.status === 'completed') {
              // Same-device: the wallet's redirect signed this browser in, in another window.
              document.getElementById('wallet-signin-confirm').hidden = true;
              return say(w('signedInElsewhere', 'Signed in, in the window your wallet opened.'));
            }
            // Shown once; polling goes on, since the wallet's redirect may finish the sign-in elsewhere.
            if (j.status === 'verified' && !reviewing) {
              reviewing = true;
              confirmName().catch(function (e) {
                // The review failed (expired, refused): say so; the poll goes on and ends the sign-in.
                say(e && e.message ? e.message : w('nameFailed', 'the name could not be shown'));
              });
            }
            if (j.status !== 'pending' && j.status !== 'verified') throw new Error(j.error_description || w('notAccepted', 'the presentation was not accepted'));
            if (Date.now() > deadline) throw new Error(w('expired', 'the request expired, start again'));
            if (j.refused_responses) say(w('refused', 'A response was refused. Waiting for your wallet…') + ' (' + j.check + ')');
            setTimeout(poll, 1000);
          })
          .catch(failed);
      }
      poll();
    }, failed);
  });
})();
