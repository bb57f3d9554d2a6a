/**
 * `node:readline`, importable so a plugin that reads files line by line in
 * some path still loads, refused when used: an engine has no terminal, and
 * its filesystem offers no streams to read lines from (`node:fs`). Every
 * function throws `ERR_CTXBOX_REFUSED` naming itself.
 */

function refused(what: string): never {
  const error = new Error(`readline.${what} is not offered to a sandboxed engine (no terminal or streams)`) as Error & { code: string };
  error.code = "ERR_CTXBOX_REFUSED";
  throw error;
}

export const createInterface = (): never => refused("createInterface");
export const emitKeypressEvents = (): never => refused("emitKeypressEvents");
export const clearLine = (): never => refused("clearLine");
export const clearScreenDown = (): never => refused("clearScreenDown");
export const cursorTo = (): never => refused("cursorTo");
export const moveCursor = (): never => refused("moveCursor");

/** Refused as `createInterface`. */
export class Interface {
  constructor() {
    refused("Interface");
  }
}

export const promises = { createInterface, Interface };

export default { createInterface, emitKeypressEvents, clearLine, clearScreenDown, cursorTo, moveCursor, Interface, promises };
