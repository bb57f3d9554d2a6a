/**
 * Bytes to and from text in the encodings `node:crypto` and `Buffer` name:
 * `utf8`, `hex`, `base64`, `base64url`, `latin1` (`binary`).
 */

/** An encoding name as Node spells it. */
export type Encoding = "utf8" | "utf-8" | "hex" | "base64" | "base64url" | "latin1" | "binary";

const BASE64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

function known(encoding: string): Encoding {
  const lower = encoding.toLowerCase();
  if (["utf8", "utf-8", "hex", "base64", "base64url", "latin1", "binary"].includes(lower)) return lower as Encoding;
  const error = new TypeError(`Unknown encoding: ${encoding}`) as TypeError & { code: string };
  error.code = "ERR_UNKNOWN_ENCODING";
  throw error;
}

/** `bytes` as text in `encoding`. */
export function encode(bytes: Uint8Array, encoding: string): string {
  switch (known(encoding)) {
    case "hex":
      return Array.from(bytes, (byte) => byte.toString(16).padStart(2, "0")).join("");
    case "base64":
    case "base64url": {
      let out = "";
      for (let at = 0; at < bytes.length; at += 3) {
        const n = ((bytes[at] as number) << 16) | ((bytes[at + 1] ?? 0) << 8) | (bytes[at + 2] ?? 0);
        const chars = [18, 12, 6, 0].map((shift) => BASE64.charAt((n >> shift) & 63));
        const kept = Math.min(4, Math.ceil(((bytes.length - at) * 8) / 6));
        out += chars.slice(0, kept).join("") + "=".repeat(4 - kept);
      }
      return encoding.toLowerCase() === "base64url" ? out.replaceAll("+", "-").replaceAll("/", "_").replace(/=+$/, "") : out;
    }
    case "latin1":
    case "binary":
      return Array.from(bytes, (byte) => String.fromCharCode(byte)).join("");
    default:
      return new TextDecoder().decode(bytes);
  }
}

/** The bytes `text` stands for in `encoding` (Node's leniency: invalid hex ends the bytes, base64 skips what is not base64). */
export function decode(text: string, encoding: string): Uint8Array {
  switch (known(encoding)) {
    case "hex": {
      const out: number[] = [];
      for (let at = 0; at + 1 < text.length; at += 2) {
        const byte = Number.parseInt(text.slice(at, at + 2), 16);
        if (!/^[0-9a-fA-F]{2}$/.test(text.slice(at, at + 2))) break;
        out.push(byte);
      }
      return new Uint8Array(out);
    }
    case "base64":
    case "base64url": {
      const digits = text.replaceAll("-", "+").replaceAll("_", "/").replace(/[^A-Za-z0-9+/]/g, "");
      const out: number[] = [];
      let bits = 0;
      let value = 0;
      for (const char of digits) {
        value = (value << 6) | BASE64.indexOf(char);
        bits += 6;
        if (bits >= 8) {
          bits -= 8;
          out.push((value >> bits) & 0xff);
        }
      }
      return new Uint8Array(out);
    }
    case "latin1":
    case "binary":
      return Uint8Array.from(text, (char) => char.charCodeAt(0) & 0xff);
    default:
      return new TextEncoder().encode(text);
  }
}
