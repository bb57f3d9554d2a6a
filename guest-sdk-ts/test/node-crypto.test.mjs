// The guest's node:crypto against Node's own: the pure-JavaScript SHA-256
// and SHA-1 over lengths around every block boundary, fed whole and in
// pieces, each digest encoding; randomUUID and randomBytes' shapes.
import assert from "node:assert/strict";
import nodeCrypto from "node:crypto";
import { test } from "node:test";
import { sdkModule } from "./sdk-source.mjs";

const crypto = (await sdkModule("node/crypto")).default;
const { encode, decode } = await sdkModule("node/encoding");
const memo = await sdkModule("node/digest-memo");

/** Deterministic bytes of `length`. */
const bytes = (length) => Uint8Array.from({ length }, (_, i) => (i * 31 + 7) & 0xff);

test("createHash sha256 and sha1 digest as Node's, whole or in pieces, at every block edge", () => {
  for (const algorithm of ["sha256", "sha1"]) {
    for (const length of [0, 1, 3, 55, 56, 57, 63, 64, 65, 119, 120, 127, 128, 129, 1000, 100_003]) {
      const data = bytes(length);
      const expected = nodeCrypto.createHash(algorithm).update(data).digest("hex");
      assert.equal(crypto.createHash(algorithm).update(data).digest("hex"), expected, `${algorithm} of ${length} bytes`);
      const pieces = crypto.createHash(algorithm);
      for (let at = 0; at < length; at += 17) pieces.update(data.subarray(at, at + 17));
      assert.equal(pieces.digest("hex"), expected, `${algorithm} of ${length} bytes in pieces of 17`);
    }
  }
});

test("text is hashed as UTF-8 (or as its encoding says) and digests in every encoding", () => {
  const text = "héllo, 世界 🌍";
  for (const encoding of ["hex", "base64", "base64url", "latin1"]) {
    assert.equal(
      crypto.createHash("sha256").update(text).update("more").digest(encoding),
      nodeCrypto.createHash("sha256").update(text).update("more").digest(encoding),
      encoding,
    );
  }
  assert.equal(
    crypto.createHash("sha1").update("68656c6c6f", "hex").digest("hex"),
    nodeCrypto.createHash("sha1").update("68656c6c6f", "hex").digest("hex"),
  );
  assert.deepEqual([...crypto.createHash("sha256").update("x").digest()], [...nodeCrypto.createHash("sha256").update("x").digest()]);
  assert.equal(crypto.createHash("SHA-256").update("").digest("hex"), nodeCrypto.createHash("sha256").digest("hex"));
});

test("a long text hashed again is answered from memory with Node's digest, whatever follows it or is done to the answer", () => {
  const text = "message ".repeat(500) + "世界";
  const expected = nodeCrypto.createHash("sha256").update(text).digest("hex");
  assert.equal(memo.rememberedDigest("sha256", [text]), undefined);
  assert.equal(crypto.createHash("sha256").update(text).digest("hex"), expected);
  assert.equal(encode(memo.rememberedDigest("sha256", [text]), "hex"), expected, "the digest is remembered");
  const bytesAnswer = crypto.createHash("sha256").update(text).digest();
  assert.equal(encode(bytesAnswer, "hex"), expected, "remembered");
  bytesAnswer.fill(0);
  assert.equal(crypto.createHash("sha256").update(text).digest("hex"), expected, "the answer is a copy");
  assert.equal(
    crypto.createHash("sha256").update(text).update("!").digest("hex"),
    nodeCrypto.createHash("sha256").update(text).update("!").digest("hex"),
    "more input after the text",
  );
  assert.equal(
    crypto.createHash("sha1").update(text).digest("base64"),
    nodeCrypto.createHash("sha1").update(text).digest("base64"),
    "the algorithm is part of what is remembered",
  );
  assert.equal(
    crypto.createHash("sha256").update(text, "latin1").digest("hex"),
    nodeCrypto.createHash("sha256").update(text, "latin1").digest("hex"),
    "another encoding is hashed as that encoding",
  );
});

test("texts fed in a row are remembered as that row, and the same characters cut differently are not mistaken for it", () => {
  const content = "消息 message ".repeat(300);
  const row = ["user", "\u0000", content];
  const node = (parts) => parts.reduce((hash, part) => hash.update(part), nodeCrypto.createHash("sha256")).digest("hex");
  const ours = (parts) => parts.reduce((hash, part) => hash.update(part), crypto.createHash("sha256")).digest("hex");
  assert.equal(memo.rememberedDigest("sha256", row), undefined);
  assert.equal(ours(row), node(row));
  assert.equal(encode(memo.rememberedDigest("sha256", row), "hex"), node(row), "the row's digest is remembered");
  assert.equal(ours(row), node(row), "and answered from memory");
  // A surrogate pair split between two updates is two unpaired halves to
  // Node (each becomes U+FFFD), not the emoji it makes when joined.
  const emoji = "\u{1F600}" + content;
  const split = [emoji.slice(0, 1), emoji.slice(1)];
  assert.equal(ours([emoji]), node([emoji]));
  assert.equal(ours(split), node(split));
  assert.notEqual(ours(split), ours([emoji]));
  const bytesAfter = crypto.createHash("sha256").update(content).update(new Uint8Array([1, 2])).digest("hex");
  assert.equal(bytesAfter, nodeCrypto.createHash("sha256").update(content).update(new Uint8Array([1, 2])).digest("hex"), "bytes after texts");
});

test("the remembered texts stay under two million characters", () => {
  for (let i = 0; i < 400; i += 1) crypto.createHash("sha256").update(`${i} `.padEnd(20_000, "x")).digest("hex");
  assert.ok(memo.heldTextCharacters() <= 2_000_000, `${memo.heldTextCharacters()} characters held`);
  assert.ok(memo.heldTextCharacters() > 1_900_000, "and the memo is used up to its cap");
  const text = "399 ".padEnd(20_000, "x");
  assert.equal(crypto.createHash("sha256").update(text).digest("hex"), nodeCrypto.createHash("sha256").update(text).digest("hex"));
});

test("what is not offered is a clear error; a digest is read once", () => {
  assert.throws(() => crypto.createHash("md5"), { code: "ERR_CRYPTO_INVALID_DIGEST", message: /md5.*offers sha256 and sha1/ });
  assert.throws(() => crypto.createHash("sha256").update(42), { code: "ERR_INVALID_ARG_TYPE" });
  const hash = crypto.createHash("sha256");
  hash.digest("hex");
  assert.throws(() => hash.digest("hex"), /Digest already called/);
  assert.throws(() => hash.update("x"), /Digest already called/);
});

test("randomUUID is a version 4 UUID; randomBytes gives the bytes asked for", () => {
  const uuids = new Set(Array.from({ length: 100 }, () => crypto.randomUUID()));
  assert.equal(uuids.size, 100);
  for (const uuid of uuids) assert.match(uuid, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  const random = crypto.randomBytes(100_000);
  assert.equal(random.length, 100_000);
  assert.ok(new Set(random.subarray(65_536)).size > 200, "past the first 64 KiB the bytes are random too");
  assert.throws(() => crypto.randomBytes(-1), RangeError);
});

test("the encodings answer as Buffer's", () => {
  for (const length of [0, 1, 2, 3, 4, 5, 31]) {
    const data = bytes(length);
    for (const encoding of ["hex", "base64", "base64url", "latin1", "utf8"]) {
      const text = Buffer.from(data).toString(encoding);
      if (encoding !== "utf8") assert.equal(encode(data, encoding), text, `${encoding} of ${length}`);
      assert.deepEqual([...decode(text, encoding)], [...Buffer.from(text, encoding)], `${encoding} back, ${length}`);
    }
  }
  assert.throws(() => encode(bytes(1), "ucs9"), { code: "ERR_UNKNOWN_ENCODING" });
});
