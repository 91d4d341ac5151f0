import { html } from '../../../server/sdk.ts';

/**
 * The public page of a virtual number's room (`/room.ashx?number=…`): a visitor grants the
 * microphone and talks to the number's AI over WebRTC terminated in the appliance. Rendered on the
 * server like the transcript share page: one hashed style block, no inline script; the one script
 * is `/room.ashx?asset=room.js` (same origin), and the page connects only to its own origin.
 */

const STYLE = [
  'body{font:16px/1.5 system-ui,sans-serif;margin:0;background:#f6f7f9;color:#1b1f24}',
  'main{max-width:32rem;margin:0 auto;padding:2rem 1.5rem;text-align:center}',
  'h1{font-size:1.5rem;margin:0 0 .25rem}',
  '.meta{color:#57606a;margin:0 0 1.5rem}',
  'button{font:inherit;padding:.6rem 1.4rem;border-radius:.5rem;border:0;margin:.25rem;cursor:pointer}',
  '#join{background:#1f883d;color:#fff}',
  '#leave{background:#cf222e;color:#fff}',
  'button[disabled]{opacity:.4;cursor:default}',
  '#status{margin-top:1.25rem;min-height:1.5em;color:#57606a}',
].join('');

/**
 * Headers of the page and its script: script only from this origin (no inline script, no eval),
 * fetches only to this origin, microphone for this origin only, no framing, no indexing, no Referer.
 */
export const ROOM_PAGE_HEADERS: Readonly<Record<string, string>> = Object.freeze({
  'Content-Security-Policy': html.csp({ script: ["'self'"], connect: ["'self'"], media: ["'self'", 'blob:', 'mediastream:'], styles: [STYLE] }),
  'Permissions-Policy': 'microphone=(self), camera=()',
  'X-Robots-Tag': 'noindex, nofollow, noarchive',
  'Referrer-Policy': 'no-referrer',
  'Cache-Control': 'no-store',
  'X-Frame-Options': 'DENY',
  'X-Content-Type-Options': 'nosniff',
  'Cross-Origin-Opener-Policy': 'same-origin',
  'Cross-Origin-Resource-Policy': 'same-origin',
});

const page = (title: string, body: string) => html.page({ title, body, style: STYLE });

/** The room of one number; its data attributes are all the script reads. `visitor`: who is signed in (signed-in rooms). */
export function renderRoomPage(n: { number: string; name: string; visibility: string; maxDurationSec: number; visitor?: string }): string {
  const title = n.name || n.number;
  return page(
    title,
    [
      `<h1>${html.escape(title)}</h1>`,
      `<p class="meta">${n.visibility === 'signed-in' ? 'For signed-in users · ' : ''}talk to the assistant in your browser</p>`,
      ...(n.visitor ? [`<p class="meta" id="visitor">Signed in as ${html.escape(n.visitor)}</p>`] : []),
      `<div id="room" data-number="${html.escape(n.number)}" data-visibility="${html.escape(n.visibility)}" data-max="${html.escape(n.maxDurationSec)}">`,
      '<button id="join" type="button">Start talking</button>',
      '<button id="leave" type="button" disabled>Hang up</button>',
      '<p id="status" role="status" aria-live="polite"></p>',
      '<audio id="remote" autoplay></audio>',
      '</div>',
      '<script src="/room.ashx?asset=room.js"></script>',
    ].join('\n'),
  );
}

export const ROOM_NOT_FOUND_PAGE = page('Room not available', '<h1>Room not available</h1>\n<p class="meta">This room does not exist.</p>');

export const SIGN_IN_UNAVAILABLE_PAGE = page(
  'Room not available',
  '<h1>Room not available</h1>\n<p class="meta">This room is for signed-in users, and sign-in is not available on this appliance right now.</p>',
);

/** The sign-in came back without a session; `retry` is the room's page (a new sign-in) when known. */
export function renderSignInFailedPage(reason: string, retry: string | null): string {
  return page(
    'Sign-in failed',
    [
      '<h1>Sign-in failed</h1>',
      `<p class="meta">${html.escape(reason.charAt(0).toUpperCase() + reason.slice(1))}.</p>`,
      ...(retry ? [`<p><a href="${html.escape(retry)}">Try again</a></p>`] : []),
    ].join('\n'),
  );
}

/**
 * The page's script (plain browser JavaScript, no build step). The offer is sent with every ICE
 * candidate gathered (no trickle): one request, one answer. `window.sovRoom` exposes the
 * connection and the remote stream (for tests and the browser's devtools).
 */
export const ROOM_SCRIPT = String.raw`'use strict';
(function () {
  var root = document.getElementById('room');
  var join = document.getElementById('join');
  var leave = document.getElementById('leave');
  var status = document.getElementById('status');
  var audio = document.getElementById('remote');
  var number = root.getAttribute('data-number');
  var state = { pc: null, stream: null, remote: null, callId: null, leaveToken: null, phase: 'idle', error: null };
  window.sovRoom = state;
  function say(text) { status.textContent = text; }
  function gathered(pc) {
    return new Promise(function (resolve) {
      if (pc.iceGatheringState === 'complete') return resolve();
      var t = setTimeout(resolve, 3000);
      pc.addEventListener('icegatheringstatechange', function () {
        if (pc.iceGatheringState === 'complete') { clearTimeout(t); resolve(); }
      });
    });
  }
  function hangup(reason) {
    if (state.phase === 'ended') return;
    state.phase = 'ended';
    leave.disabled = true;
    join.disabled = false;
    if (state.callId && state.leaveToken) {
      fetch('/api.ashx/v1/rooms/leave', {
        method: 'POST', keepalive: true,
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ callId: state.callId, leaveToken: state.leaveToken })
      }).catch(function () {});
    }
    if (state.pc) state.pc.close();
    if (state.stream) state.stream.getTracks().forEach(function (t) { t.stop(); });
    say(reason || 'Call ended.');
  }
  async function start() {
    join.disabled = true;
    state.phase = 'starting';
    state.error = null;
    try {
      say('Asking for your microphone…');
      var stream = await navigator.mediaDevices.getUserMedia({ audio: { echoCancellation: true, noiseSuppression: true }, video: false });
      state.stream = stream;
      var pc = new RTCPeerConnection({ iceServers: [] });
      state.pc = pc;
      stream.getAudioTracks().forEach(function (t) { pc.addTrack(t, stream); });
      pc.addEventListener('track', function (e) {
        state.remote = e.streams[0] || new MediaStream([e.track]);
        audio.srcObject = state.remote;
        audio.play().catch(function () {});
      });
      pc.addEventListener('connectionstatechange', function () {
        if (pc.connectionState === 'connected') { state.phase = 'connected'; say('Connected. Speak now.'); }
        if ((pc.connectionState === 'failed' || pc.connectionState === 'closed') && state.phase !== 'ended') hangup('The connection ended.');
      });
      say('Connecting…');
      await pc.setLocalDescription(await pc.createOffer());
      await gathered(pc);
      // A signed-in room's session is an HttpOnly cookie of this origin: fetch sends it by itself.
      var res = await fetch('/api.ashx/v1/rooms/join', {
        method: 'POST', headers: { 'content-type': 'application/json' }, credentials: 'same-origin',
        body: JSON.stringify({ number: number, sdp: pc.localDescription.sdp })
      });
      var body = await res.json().catch(function () { return {}; });
      if (!res.ok) {
        state.error = body.error || String(res.status);
        var msg = res.status === 401 ? 'Your sign-in has ended: reload the page to sign in again.' : res.status === 429 ? 'Too many attempts; try again in a minute.' : (body.error_description || 'The room is not available.');
        state.phase = 'refused';
        if (state.pc) state.pc.close();
        stream.getTracks().forEach(function (t) { t.stop(); });
        join.disabled = false;
        say(msg);
        return;
      }
      state.callId = body.callId;
      state.leaveToken = body.leaveToken;
      await pc.setRemoteDescription({ type: 'answer', sdp: body.sdp });
      leave.disabled = false;
    } catch (e) {
      state.error = String(e && e.message || e);
      hangup('Could not start: ' + state.error);
    }
  }
  join.addEventListener('click', function () { start(); });
  leave.addEventListener('click', function () { hangup(); });
  window.addEventListener('pagehide', function () { hangup(); });
})();
`;
