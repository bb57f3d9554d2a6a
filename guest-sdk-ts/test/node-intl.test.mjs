// The guest's Intl subset against Node's own Intl (ICU), for the formats
// engines use: en-US and en-CA dates with numeric, 2-digit and named
// fields, 12- and 24-hour time, the short zone name; English numbers.
import assert from "node:assert/strict";
import { test } from "node:test";
import { sdkModule } from "./sdk-source.mjs";

const { DateTimeFormat, NumberFormat, installIntl } = await sdkModule("node/intl");

const DATES = [
  Date.UTC(2026, 0, 5, 0, 7, 9, 45), Date.UTC(2026, 11, 25, 13, 45, 0), Date.UTC(1999, 8, 30, 12, 0, 59),
  Date.UTC(2000, 1, 29, 23, 59, 59), Date.UTC(1970, 0, 1), Date.UTC(2031, 6, 4, 11, 3, 1),
];

const OPTIONS = [
  {},
  { timeZone: "UTC" },
  // What lossless-claw formats (compaction and assembler timestamps, zone abbreviations).
  { timeZone: "UTC", year: "numeric", month: "2-digit", day: "2-digit", hour: "2-digit", minute: "2-digit", hour12: false },
  { timeZone: "UTC", year: "numeric", month: "2-digit", day: "2-digit", hour: "2-digit", minute: "2-digit", second: "2-digit", hour12: false },
  { timeZone: "UTC", timeZoneName: "short" },
  { timeZone: "Etc/UTC", year: "numeric", month: "numeric", day: "numeric" },
  { year: "2-digit", month: "2-digit", day: "2-digit" },
  { month: "numeric", day: "numeric" },
  { year: "numeric", month: "2-digit" },
  { hour: "numeric", minute: "2-digit" },
  { hour: "2-digit", minute: "2-digit", hour12: true },
  { hour: "numeric", hour12: false },
  { hour: "numeric", minute: "2-digit", second: "2-digit", hourCycle: "h23" },
  { hour: "numeric", minute: "2-digit", timeZoneName: "short" },
  { month: "short", day: "numeric", year: "numeric" },
  { month: "long", day: "numeric", year: "numeric", hour: "numeric", minute: "2-digit" },
  { weekday: "short", month: "short", day: "numeric" },
  { weekday: "long", year: "numeric", month: "long", day: "numeric" },
  { month: "long", year: "numeric" },
  { dateStyle: "medium", timeStyle: "short", timeZone: "GMT" },
  { dateStyle: "short" },
  { dateStyle: "long", timeStyle: "medium" },
  { dateStyle: "full" },
];

test("DateTimeFormat formats, parts and resolved options as Node's", () => {
  for (const locale of ["en-US", "en-CA", undefined, "en"]) {
    for (const options of OPTIONS) {
      const node = new Intl.DateTimeFormat(locale, options);
      const guest = new DateTimeFormat(locale, options);
      for (const date of DATES) {
        const label = `${locale} ${JSON.stringify(options)} ${new Date(date).toISOString()}`;
        assert.deepEqual(guest.formatToParts(date), node.formatToParts(date), label);
        assert.equal(guest.format(new Date(date)), node.format(new Date(date)), label);
      }
      assert.deepEqual(guest.resolvedOptions(), node.resolvedOptions(), `${locale} ${JSON.stringify(options)} resolved`);
    }
  }
  assert.equal(new DateTimeFormat().resolvedOptions().timeZone, "UTC");
});

test("a zone the sandbox does not have is a RangeError, as an unknown zone is in Node", () => {
  assert.throws(() => new DateTimeFormat("en-US", { timeZone: "America/New_York" }), {
    name: "RangeError",
    message: /Invalid time zone specified: America\/New_York \(the sandbox has UTC only\)/,
  });
  assert.throws(() => new Intl.DateTimeFormat("en-US", { timeZone: "Mars/Base" }), RangeError);
  assert.throws(() => new DateTimeFormat("en-US", { era: "short" }), { name: "RangeError", message: /option era/ });
  assert.throws(() => new DateTimeFormat().format(Number.NaN), RangeError);
});

test("numbers format as Node's en-US", () => {
  const numbers = [0, 7, -7, 1234, 1234567.891, -9876543.21, 0.1 + 0.2, 1e21, 123.4567, Number.NaN, Infinity, -Infinity, -0,
    2.5, 1.005, 0.0005, 0.00049, 999.9995, 999999.9999, 1e-7, 12345678901234567890, 4.35, 1.0005];
  for (const options of [{}, { maximumFractionDigits: 0 }, { minimumFractionDigits: 2 }, { maximumFractionDigits: 1 },
    { useGrouping: false }, { style: "percent" }, { minimumFractionDigits: 2, maximumFractionDigits: 2 }]) {
    const node = new Intl.NumberFormat("en-US", options);
    const guest = new NumberFormat("en-US", options);
    for (const n of numbers) assert.equal(guest.format(n), node.format(n), `${n} ${JSON.stringify(options)}`);
    assert.equal(guest.format(12345678901234567890n), node.format(12345678901234567890n));
  }
  assert.throws(() => new NumberFormat("en-US", { style: "currency", currency: "USD" }), RangeError);
});

test("installIntl leaves a runtime's own Intl alone", () => {
  const before = globalThis.Intl;
  installIntl();
  assert.equal(globalThis.Intl, before, "Node has an Intl: it is kept");
});

test("without an Intl (as in StarlingMonkey), installIntl makes toLocaleString answer as Node's", () => {
  const date = new Date(Date.UTC(2026, 0, 5, 13, 7, 9));
  const expected = [
    (1234567.891).toLocaleString("en-US"), (1234).toLocaleString(), (12345n).toLocaleString("en-US"),
    date.toLocaleString("en-US", { timeZone: "UTC" }), date.toLocaleDateString("en-CA", { timeZone: "UTC" }),
    date.toLocaleTimeString("en-US", { timeZone: "UTC" }), date.toLocaleString("en-US", { timeZone: "UTC", month: "short", day: "numeric" }),
    new Intl.DateTimeFormat().resolvedOptions().timeZone,
    // Called without `new`, as lossless-claw does.
    Intl.DateTimeFormat().resolvedOptions().timeZone, Intl.NumberFormat("en-US").format(1234),
    Intl.DateTimeFormat() instanceof Intl.DateTimeFormat,
  ];
  const saved = {
    Intl: globalThis.Intl,
    number: Number.prototype.toLocaleString,
    bigint: BigInt.prototype.toLocaleString,
    dates: ["toLocaleString", "toLocaleDateString", "toLocaleTimeString"].map((name) => [name, Date.prototype[name]]),
  };
  try {
    delete globalThis.Intl;
    installIntl();
    assert.notEqual(globalThis.Intl, saved.Intl);
    const actual = [
      (1234567.891).toLocaleString("en-US"), (1234).toLocaleString(), (12345n).toLocaleString("en-US"),
      date.toLocaleString("en-US", { timeZone: "UTC" }), date.toLocaleDateString("en-CA", { timeZone: "UTC" }),
      date.toLocaleTimeString("en-US", { timeZone: "UTC" }), date.toLocaleString("en-US", { timeZone: "UTC", month: "short", day: "numeric" }),
      new Intl.DateTimeFormat().resolvedOptions().timeZone,
      // Called without `new`, as lossless-claw does.
      Intl.DateTimeFormat().resolvedOptions().timeZone, Intl.NumberFormat("en-US").format(1234),
      Intl.DateTimeFormat() instanceof Intl.DateTimeFormat,
    ];
    assert.deepEqual(actual, expected);
  } finally {
    globalThis.Intl = saved.Intl;
    Number.prototype.toLocaleString = saved.number;
    BigInt.prototype.toLocaleString = saved.bigint;
    for (const [name, method] of saved.dates) Date.prototype[name] = method;
  }
});
