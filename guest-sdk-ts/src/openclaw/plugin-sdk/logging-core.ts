/**
 * `openclaw/plugin-sdk/logging-core` inside a ctxbox engine:
 * `redactSensitiveText`, OpenClaw's masking of secrets in text a plugin logs
 * or stores. Its meaning is OpenClaw's: mode `off` leaves the text alone;
 * otherwise each pattern's match (its last non-empty group when it has
 * groups) is masked, a secret shorter than 18 characters as `***`, a longer
 * one as its first 6 and last 4 characters around `…`, a PEM private key
 * as a whole. The built-in patterns are a smaller set than OpenClaw's (HTTP
 * auth headers, `key = value` assignments of secret-sounding names, the
 * common vendor token formats, PEM keys); a plugin's own `patterns` replace
 * them, as in OpenClaw.
 */

/** `tools` (mask) or `off`. */
export type RedactSensitiveMode = "off" | "tools";
/** A pattern: a RegExp, or its source as text (`/source/flags` or a bare source, case-insensitive). */
export type RedactPattern = string | RegExp;

const MIN_KEPT_LENGTH = 18;
const KEEP_START = 6;
const KEEP_END = 4;

/** The built-in patterns, each with the secret in its last group (or the whole match). */
const DEFAULT_PATTERNS: RegExp[] = [
  /-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----/g,
  /\b(?:authorization|proxy-authorization)\s*[:=]\s*(?:bearer|basic|token)?\s*["']?([^\s"',;]+)/gi,
  /\bbearer\s+([A-Za-z0-9._~+/=-]{8,})/gi,
  /\b[A-Za-z0-9_.-]*(?:api[_-]?key|access[_-]?key|secret|token|password|passwd|credential)s?\b\s*["']?\s*[:=]\s*["']?([^\s"',;}]+)/gi,
  /\b(sk-(?:proj-|ant-)?[A-Za-z0-9_-]{16,})/g,
  /\b(gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})/g,
  /\b(xox[abprs]-[A-Za-z0-9-]{10,})/g,
  /\b((?:AKIA|ASIA)[0-9A-Z]{16})\b/g,
  /\b(AIza[0-9A-Za-z_-]{30,})/g,
];

/** How OpenClaw masks one secret. */
function maskToken(token: string): string {
  if (token.length < MIN_KEPT_LENGTH) return "***";
  return `${token.slice(0, KEEP_START)}…${token.slice(-KEEP_END)}`;
}

/** A plugin's pattern as a global RegExp, or `undefined` when it does not compile. */
function compiled(pattern: RedactPattern): RegExp | undefined {
  try {
    if (pattern instanceof RegExp) {
      return pattern.global ? pattern : new RegExp(pattern.source, `${pattern.flags}g`);
    }
    const literal = /^\/(.+)\/([a-z]*)$/s.exec(pattern);
    if (literal) {
      const flags = literal[2] ?? "";
      return new RegExp(literal[1] ?? "", flags.includes("g") ? flags : `${flags}g`);
    }
    return new RegExp(pattern, "gi");
  } catch {
    return undefined;
  }
}

/** `text` with the secrets `options.patterns` (or the built-in ones) find masked. */
export function redactSensitiveText(
  text: string,
  options?: { mode?: RedactSensitiveMode; patterns?: RedactPattern[] },
): string {
  if (!text || options?.mode === "off") return text;
  const patterns = options?.patterns?.length
    ? options.patterns.map(compiled).filter((pattern): pattern is RegExp => pattern !== undefined)
    : DEFAULT_PATTERNS;
  let redacted = text;
  for (const pattern of patterns) {
    redacted = redacted.replace(pattern, (match: string, ...rest: unknown[]) => {
      if (match.includes("PRIVATE KEY-----")) return "[REDACTED_PRIVATE_KEY]";
      // `rest` ends with the offset and the whole text (and named groups, when any).
      const groups = rest.filter((value): value is string => typeof value === "string").slice(0, -1);
      const secret = groups.findLast((group) => group.length > 0);
      return secret === undefined ? maskToken(match) : match.replace(secret, maskToken(secret));
    });
  }
  return redacted;
}
