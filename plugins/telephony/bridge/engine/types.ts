/**
 * The voice-AI engine seen by a call: one adapter per vendor (Gemini Live today) behind this
 * interface, so the call logic never speaks a vendor protocol.
 */
import type { EventEmitter } from 'node:events';

export interface EngineConfig {
  url?: string;
  apiKey: string;
  model: string;
  voice: string;
  language: string;
  systemPrompt: string;
}

export interface ToolCall {
  id: string;
  name: string;
  args: Record<string, unknown>;
}

export interface Usage {
  promptTokens: number;
  responseTokens: number;
  totalTokens: number;
}

export interface EngineEvents {
  /** Model speech, PCM16 mono at `outputRate`. */
  audio: [pcm: Int16Array];
  /** The caller barged in: drop queued playback. */
  interrupted: [];
  inputTranscript: [text: string];
  outputTranscript: [text: string];
  turnComplete: [];
  toolCall: [calls: ToolCall[]];
  usage: [u: Usage];
  /** The session ended for good (not a resumable goAway). `error` null on a normal close. */
  closed: [error: string | null];
}

export interface VoiceEngine extends EventEmitter<EngineEvents> {
  readonly inputRate: number;
  readonly outputRate: number;
  /** Opens the session; resolves once the engine is ready to take audio. */
  connect(): Promise<void>;
  /** The callee answered: ask the model to speak first. */
  begin(): void;
  sendAudio(pcm: Int16Array): void;
  sendToolResponse(call: ToolCall, response: Record<string, unknown>): void;
  /** Out-of-band caller input, e.g. a DTMF digit (RFC 4733), as text for the model. */
  sendText(text: string): void;
  close(): void;
}

/** The tools the AI may call during an outbound call (issue 4 item 6). */
export const CALL_TOOLS = [
  {
    name: 'end_call',
    description: 'Hang up once the conversation is complete and you have said goodbye.',
    parameters: { type: 'OBJECT', properties: { reason: { type: 'STRING', description: 'short reason' } } },
  },
  {
    name: 'transfer_to_user',
    description: 'Transfer the caller to a person: a user of the organisation or a phone number in E.164.',
    parameters: {
      type: 'OBJECT',
      properties: { user: { type: 'STRING', description: 'user name or e-mail' }, phone: { type: 'STRING', description: 'E.164 number' } },
    },
  },
  {
    name: 'report_voicemail',
    description: 'Call this when you reach a voicemail box or answering machine instead of a person.',
    parameters: { type: 'OBJECT', properties: {} },
  },
  {
    name: 'callback_later',
    description: 'The person asks to be called at another time; say goodbye, then call this.',
    parameters: { type: 'OBJECT', properties: { when: { type: 'STRING', description: 'when they asked to be called' } } },
  },
] as const;
