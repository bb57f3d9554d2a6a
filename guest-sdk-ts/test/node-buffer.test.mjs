// The guest's Buffer (the `buffer` npm package the SDK bundles) against
// Node's own, for what engines do with it: byteLength, from/toString in
// each encoding, alloc, concat, slices and typed reads.
import assert from "node:assert/strict";
import { test } from "node:test";
import { sdkModule } from "./sdk-source.mjs";

const { Buffer: GuestBuffer, installBuffer } = await sdkModule("node/buffer");

test("the SDK's Buffer is the npm package, not Node's", () => {
  assert.notEqual(GuestBuffer, Buffer);
});

test("byteLength, from and toString in every encoding answer as Node's", () => {
  for (const text of ["", "hello", "héllo wörld", "世界🌍", "a\u0000b", "68656c6c6f", "aGVsbG8=", "aGVsbG8"]) {
    assert.equal(GuestBuffer.byteLength(text), Buffer.byteLength(text), `byteLength ${text}`);
    // Text in each encoding it is valid in (the package and Node differ on invalid hex).
    const valid = ["utf8", "latin1", "ascii", "utf16le"];
    if (/^([0-9a-f]{2})*$/.test(text)) valid.push("hex");
    if (/^[A-Za-z0-9+/]*=*$/.test(text)) valid.push("base64");
    for (const encoding of valid) {
      const guest = GuestBuffer.from(text, encoding);
      const node = Buffer.from(text, encoding);
      assert.deepEqual([...guest], [...node], `from(${JSON.stringify(text)}, ${encoding})`);
      for (const out of ["utf8", "hex", "base64", "latin1"]) {
        assert.equal(guest.toString(out), node.toString(out), `${JSON.stringify(text)} ${encoding} -> ${out}`);
      }
    }
  }
});

test("base64url, which the package does not have, is a clear error (node:crypto's digest has it)", () => {
  assert.throws(() => GuestBuffer.from("aGk", "base64url"), /Unknown encoding: base64url/);
});

test("alloc, concat, slice, compare, equals and typed reads answer as Node's", () => {
  const parts = [GuestBuffer.from("ab"), GuestBuffer.alloc(3, 7), GuestBuffer.from([1, 2, 250])];
  const nodeParts = [Buffer.from("ab"), Buffer.alloc(3, 7), Buffer.from([1, 2, 250])];
  const joined = GuestBuffer.concat(parts);
  const nodeJoined = Buffer.concat(nodeParts);
  assert.deepEqual([...joined], [...nodeJoined]);
  assert.equal(joined.subarray(1, 4).toString("hex"), nodeJoined.subarray(1, 4).toString("hex"));
  assert.equal(joined.readUInt16BE(5), nodeJoined.readUInt16BE(5));
  assert.equal(joined.readInt8(7), nodeJoined.readInt8(7));
  assert.equal(GuestBuffer.compare(parts[0], parts[2]), Buffer.compare(nodeParts[0], nodeParts[2]));
  assert.ok(GuestBuffer.from("x").equals(GuestBuffer.from("x")));
  assert.ok(GuestBuffer.isBuffer(joined) && joined instanceof Uint8Array);
  assert.deepEqual(JSON.stringify(GuestBuffer.from("hi")), JSON.stringify(Buffer.from("hi")));
  assert.equal(GuestBuffer.from("  padded  ").toString().trim(), "padded");
});

test("installBuffer keeps a runtime's own Buffer", () => {
  installBuffer();
  assert.equal(globalThis.Buffer, Buffer);
});
