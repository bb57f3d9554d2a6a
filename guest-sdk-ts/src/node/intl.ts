/**
 * An `Intl` subset for engine code written for Node, whose output matches
 * Node's (ICU's) for what engines format: dates in `en-US` and `en-CA`
 * (numeric and 2-digit fields, short and long month and weekday names,
 * 12- and 24-hour time, the short time zone name), numbers in the English
 * grouping (`1,234.5`), and `DateTimeFormat().resolvedOptions().timeZone`.
 *
 * The sandbox's only time zone is UTC (it has no zone data): `UTC`, `GMT`
 * and `Etc/UTC`/`Etc/GMT` are accepted, any other zone is a `RangeError`
 * as an unknown one is in Node. Locales other than `en-CA` format as
 * `en-US` (as an `Intl` without that locale's data falls back to its
 * default). Options outside the subset are a `RangeError` naming them.
 */

const MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December"];
const WEEKDAYS = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"];
/** What Node's ICU puts between a time and its day period. */
const BEFORE_DAY_PERIOD = " ";

/** One piece of a formatted date, as `formatToParts` answers it. */
export interface DateTimeFormatPart {
  type: "weekday" | "year" | "month" | "day" | "hour" | "minute" | "second" | "dayPeriod" | "timeZoneName" | "literal";
  value: string;
}

/** The options this subset takes (the rest of `Intl.DateTimeFormatOptions` is refused). */
export interface DateTimeFormatOptions {
  timeZone?: string;
  weekday?: "long" | "short" | "narrow";
  year?: "numeric" | "2-digit";
  month?: "numeric" | "2-digit" | "long" | "short" | "narrow";
  day?: "numeric" | "2-digit";
  hour?: "numeric" | "2-digit";
  minute?: "numeric" | "2-digit";
  second?: "numeric" | "2-digit";
  hour12?: boolean;
  hourCycle?: "h11" | "h12" | "h23" | "h24";
  timeZoneName?: "short";
  dateStyle?: "full" | "long" | "medium" | "short";
  timeStyle?: "medium" | "short";
  localeMatcher?: string;
  formatMatcher?: string;
  calendar?: "gregory";
  numberingSystem?: "latn";
}

const DATE_TIME_OPTIONS = new Set([
  "timeZone", "weekday", "year", "month", "day", "hour", "minute", "second", "hour12", "hourCycle", "timeZoneName",
  "dateStyle", "timeStyle", "localeMatcher", "formatMatcher", "calendar", "numberingSystem",
]);
const FIELDS = ["weekday", "year", "month", "day", "hour", "minute", "second"] as const;

function unsupported(what: string): RangeError {
  return new RangeError(`${what} is not offered by the sandbox's Intl subset`);
}

/** `en-CA` or `en-US`: the first requested locale's, as far as the subset has it. */
function localeOf(locales: string | string[] | undefined): "en-US" | "en-CA" {
  const first = Array.isArray(locales) ? locales[0] : locales;
  return typeof first === "string" && /^en-CA\b/i.test(first) ? "en-CA" : "en-US";
}

/** The locale `resolvedOptions` names: `en` when asked for, else the one formatted. */
function resolvedLocale(locales: string | string[] | undefined, formatted: string): string {
  const first = Array.isArray(locales) ? locales[0] : locales;
  return typeof first === "string" && first.toLowerCase() === "en" ? "en" : formatted;
}

/** The time zone's canonical name, if the sandbox has it. */
function timeZoneOf(zone: string | undefined): string {
  if (zone === undefined) return "UTC";
  const upper = String(zone).toUpperCase();
  if (["UTC", "GMT", "ETC/UTC", "ETC/GMT", "ETC/UCT", "UCT", "ETC/ZULU", "ZULU"].includes(upper)) return "UTC";
  throw new RangeError(`Invalid time zone specified: ${zone} (the sandbox has UTC only)`);
}

const pad = (n: number, width = 2): string => String(n).padStart(width, "0");

/** A date formatter, like `Intl.DateTimeFormat`, for the subset in the module's comment. */
export class DateTimeFormat {
  #locale: "en-US" | "en-CA";
  #resolvedLocale: string;
  #timeZone: string;
  #fields: Partial<Record<(typeof FIELDS)[number], string>> = {};
  #hourCycle: "h12" | "h23" | undefined;
  #timeZoneName: "short" | undefined;
  #styles: Pick<DateTimeFormatOptions, "dateStyle" | "timeStyle">;

  constructor(locales?: string | string[], options: DateTimeFormatOptions = {}) {
    for (const key of Object.keys(options ?? {})) if (!DATE_TIME_OPTIONS.has(key)) throw unsupported(`the option ${key}`);
    this.#locale = localeOf(locales);
    this.#resolvedLocale = resolvedLocale(locales, this.#locale);
    this.#timeZone = timeZoneOf(options.timeZone);
    const { dateStyle, timeStyle } = options;
    this.#styles = { ...(dateStyle ? { dateStyle } : {}), ...(timeStyle ? { timeStyle } : {}) };
    if (dateStyle || timeStyle) {
      if (FIELDS.some((field) => options[field] !== undefined)) {
        throw new TypeError("Can't set option dateStyle or timeStyle together with date or time fields");
      }
      Object.assign(this.#fields, dateStyleFields(dateStyle, this.#locale), timeStyle ? { hour: "numeric", minute: "2-digit" } : {});
      if (timeStyle === "medium") this.#fields.second = "2-digit";
    } else {
      for (const field of FIELDS) if (options[field] !== undefined) this.#fields[field] = options[field];
      if (FIELDS.every((field) => options[field] === undefined)) Object.assign(this.#fields, { year: "numeric", month: "numeric", day: "numeric" });
    }
    if (this.#fields.hour !== undefined) {
      const twelve = options.hour12 ?? (options.hourCycle ? ["h11", "h12"].includes(options.hourCycle) : true);
      this.#hourCycle = twelve ? "h12" : "h23";
    }
    if (options.timeZoneName !== undefined && options.timeZoneName !== "short") throw unsupported(`timeZoneName ${options.timeZoneName}`);
    this.#timeZoneName = options.timeZoneName;
    // en-CA writes the months and days of a numeric date with two digits.
    if (this.#locale === "en-CA" && (this.#fields.month === "numeric" || this.#fields.month === "2-digit")) {
      for (const field of ["month", "day"] as const) if (this.#fields[field] === "numeric") this.#fields[field] = "2-digit";
    }
  }

  /** `date` (a `Date` or milliseconds; now when left out) as text. */
  format(date?: Date | number): string {
    return this.formatToParts(date)
      .map((part) => part.value)
      .join("");
  }

  /** `date` as its parts. */
  formatToParts(date: Date | number = Date.now()): DateTimeFormatPart[] {
    const time = typeof date === "number" ? date : Number(date);
    if (!Number.isFinite(time)) throw new RangeError("Invalid time value");
    const at = new Date(time);
    const parts: DateTimeFormatPart[] = [];
    const literal = (value: string) => parts.push({ type: "literal", value });
    const dateParts = this.#dateParts(at);
    const timeParts = this.#timeParts(at);
    parts.push(...dateParts);
    // ICU joins a long date to its time with " at ", shorter ones with ", ".
    if (dateParts.length > 0 && timeParts.length > 0) literal(this.#fields.month === "long" ? " at " : ", ");
    parts.push(...timeParts);
    if (this.#timeZoneName) {
      literal(timeParts.length > 0 ? " " : ", ");
      parts.push({ type: "timeZoneName", value: "UTC" });
    }
    return parts;
  }

  /** The options in effect, as Node reports them. */
  resolvedOptions(): Record<string, unknown> {
    const resolved: Record<string, unknown> = {
      locale: this.#resolvedLocale,
      calendar: "gregory",
      numberingSystem: "latn",
      timeZone: this.#timeZone,
    };
    if (this.#hourCycle) Object.assign(resolved, { hourCycle: this.#hourCycle, hour12: this.#hourCycle === "h12" });
    // With a style, Node reports the style rather than the fields it stands for.
    if (this.#styles.dateStyle || this.#styles.timeStyle) return Object.assign(resolved, this.#styles);
    for (const field of FIELDS) if (this.#fields[field] !== undefined) resolved[field] = this.#fields[field];
    if (this.#hourCycle === "h23" && resolved.hour === "numeric") resolved.hour = "2-digit";
    if (this.#timeZoneName) resolved.timeZoneName = this.#timeZoneName;
    return resolved;
  }

  /** The locales the subset has of `locales`. */
  static supportedLocalesOf(locales: string | string[]): string[] {
    return (Array.isArray(locales) ? locales : [locales]).filter((locale) => /^en(-US|-CA)?$/i.test(locale));
  }

  #dateParts(at: Date): DateTimeFormatPart[] {
    const { weekday, year, month, day } = this.#fields;
    const out: DateTimeFormatPart[] = [];
    const literal = (value: string) => out.push({ type: "literal", value });
    const yearText = year === "2-digit" ? pad(at.getUTCFullYear() % 100) : String(at.getUTCFullYear());
    const dayText = day === "2-digit" ? pad(at.getUTCDate()) : String(at.getUTCDate());
    if (weekday) {
      const name = WEEKDAYS[at.getUTCDay()] as string;
      out.push({ type: "weekday", value: weekday === "long" ? name : weekday === "short" ? name.slice(0, 3) : name.charAt(0) });
      if (year || month || day) literal(", ");
    }
    if (month === "long" || month === "short" || month === "narrow") {
      const name = MONTHS[at.getUTCMonth()] as string;
      out.push({ type: "month", value: month === "long" ? name : month === "short" ? name.slice(0, 3) : name.charAt(0) });
      if (day) {
        literal(" ");
        out.push({ type: "day", value: dayText });
      }
      if (year) {
        literal(day ? ", " : " ");
        out.push({ type: "year", value: yearText });
      }
      return out;
    }
    const monthText = month === "2-digit" ? pad(at.getUTCMonth() + 1) : String(at.getUTCMonth() + 1);
    const numeric: DateTimeFormatPart[] = [];
    const order: ("year" | "month" | "day")[] = this.#locale === "en-CA" ? ["year", "month", "day"] : ["month", "day", "year"];
    for (const field of order) {
      if (!this.#fields[field]) continue;
      if (numeric.length > 0) numeric.push({ type: "literal", value: this.#locale === "en-CA" ? "-" : "/" });
      numeric.push({ type: field, value: field === "year" ? yearText : field === "month" ? monthText : dayText });
    }
    return out.concat(numeric);
  }

  #timeParts(at: Date): DateTimeFormatPart[] {
    const { hour, minute, second } = this.#fields;
    const out: DateTimeFormatPart[] = [];
    if (hour === undefined && minute === undefined && second === undefined) return out;
    if (hour !== undefined) {
      const hours = at.getUTCHours();
      const value = this.#hourCycle === "h12" ? (hours % 12 === 0 ? 12 : hours % 12) : hours;
      out.push({ type: "hour", value: hour === "2-digit" || this.#hourCycle === "h23" ? pad(value) : String(value) });
    }
    if (minute !== undefined) {
      if (out.length > 0) out.push({ type: "literal", value: ":" });
      out.push({ type: "minute", value: hour !== undefined || minute === "2-digit" ? pad(at.getUTCMinutes()) : String(at.getUTCMinutes()) });
    }
    if (second !== undefined) {
      if (out.length > 0) out.push({ type: "literal", value: ":" });
      out.push({ type: "second", value: out.length > 0 || second === "2-digit" ? pad(at.getUTCSeconds()) : String(at.getUTCSeconds()) });
    }
    if (hour !== undefined && this.#hourCycle === "h12") {
      const pm = at.getUTCHours() >= 12;
      out.push({ type: "literal", value: BEFORE_DAY_PERIOD });
      const period = this.#locale === "en-CA" ? (pm ? "p.m." : "a.m.") : pm ? "PM" : "AM";
      out.push({ type: "dayPeriod", value: period });
    }
    return out;
  }
}

/** The fields a `dateStyle` stands for in `locale` (en-CA's short date keeps the whole year). */
function dateStyleFields(style: DateTimeFormatOptions["dateStyle"], locale: string): DateTimeFormatOptions {
  switch (style) {
    case undefined:
      return {};
    case "short":
      return { year: locale === "en-CA" ? "numeric" : "2-digit", month: "numeric", day: "numeric" };
    case "medium":
      return { year: "numeric", month: "short", day: "numeric" };
    case "long":
      return { year: "numeric", month: "long", day: "numeric" };
    case "full":
      return { weekday: "long", year: "numeric", month: "long", day: "numeric" };
  }
}

/** The options of {@link NumberFormat} in the subset. */
export interface NumberFormatOptions {
  style?: "decimal" | "percent";
  minimumFractionDigits?: number;
  maximumFractionDigits?: number;
  useGrouping?: boolean;
  localeMatcher?: string;
}

const NUMBER_OPTIONS = new Set(["style", "minimumFractionDigits", "maximumFractionDigits", "useGrouping", "localeMatcher"]);

/** `digits` (a decimal integer's digits) grouped by thousands with `,`. */
const grouped = (digits: string): string => digits.replace(/\B(?=(\d{3})+(?!\d))/g, ",");

/**
 * `value` × 10^`shift` in decimal, rounded half away from zero to `max`
 * fraction digits from its shortest decimal form (as ICU rounds), at least
 * `min` of them.
 */
function decimal(value: number, min: number, max: number, shift: number): { integer: string; fraction: string } {
  const [mantissa = "0", exponentText = "0"] = Math.abs(value).toExponential().split("e");
  const digits = mantissa.replace(".", "");
  const point = Number(exponentText) + 1 + (value === 0 ? 0 : shift); // digits before the decimal point
  const padded = point <= 0 ? "0".repeat(1 - point) + digits : digits.padEnd(point, "0");
  const integerLength = Math.max(point, 1);
  let kept = padded.padEnd(integerLength + max, "0").slice(0, integerLength + max);
  const next = padded.charAt(integerLength + max);
  if (next !== "" && next >= "5") {
    kept = (BigInt(kept) + 1n).toString().padStart(kept.length, "0");
  }
  const cut = kept.length - max;
  const integer = kept.slice(0, cut).replace(/^0+(?=\d)/, "") || "0";
  const fraction = kept.slice(cut).replace(/0+$/, "").padEnd(min, "0");
  return { integer, fraction };
}

/** A number formatter, like `Intl.NumberFormat`, in the English grouping (`en-US`, `en-CA`). */
export class NumberFormat {
  #locale: "en-US" | "en-CA";
  #percent: boolean;
  #min: number;
  #max: number;
  #grouping: boolean;

  constructor(locales?: string | string[], options: NumberFormatOptions = {}) {
    for (const key of Object.keys(options ?? {})) if (!NUMBER_OPTIONS.has(key)) throw unsupported(`the option ${key}`);
    if (options.style !== undefined && options.style !== "decimal" && options.style !== "percent") throw unsupported(`style ${options.style}`);
    this.#locale = localeOf(locales);
    this.#percent = options.style === "percent";
    this.#min = options.minimumFractionDigits ?? 0;
    this.#max = Math.max(this.#min, options.maximumFractionDigits ?? (this.#percent ? 0 : 3));
    if (this.#min < 0 || this.#max > 100) throw new RangeError("maximumFractionDigits value is out of range.");
    this.#grouping = options.useGrouping ?? true;
  }

  /** `value` as text. */
  format(value: number | bigint | string): string {
    if (typeof value === "bigint") {
      const digits = (value < 0n ? -value : value).toString();
      return this.#finish(value < 0n, this.#percent ? `${digits}00` : digits, "".padEnd(this.#min, "0"));
    }
    const number = Number(value);
    const suffix = this.#percent ? "%" : "";
    if (Number.isNaN(number)) return `NaN${suffix}`;
    if (!Number.isFinite(number)) return `${number < 0 ? "-" : ""}∞${suffix}`;
    const { integer, fraction } = decimal(number, this.#min, this.#max, this.#percent ? 2 : 0);
    const negative = number < 0 || Object.is(number, -0);
    return this.#finish(negative, integer, fraction);
  }

  /** The options in effect. */
  resolvedOptions(): Record<string, unknown> {
    return {
      locale: this.#locale,
      numberingSystem: "latn",
      style: this.#percent ? "percent" : "decimal",
      minimumFractionDigits: this.#min,
      maximumFractionDigits: this.#max,
      useGrouping: this.#grouping ? "auto" : false,
    };
  }

  #finish(negative: boolean, integer: string, fraction: string): string {
    const body = (this.#grouping ? grouped(integer) : integer) + (fraction ? `.${fraction}` : "") + (this.#percent ? "%" : "");
    return negative ? `-${body}` : body;
  }
}

/**
 * `constructor` callable with or without `new`, as ECMA-402's constructors
 * are (`Intl.DateTimeFormat().resolvedOptions()` is common), still the
 * class for `instanceof`.
 */
function callable<A extends unknown[], T>(constructor: new (...args: A) => T): new (...args: A) => T {
  const either = function (...args: A): T {
    return new constructor(...args);
  };
  either.prototype = constructor.prototype;
  return either as unknown as new (...args: A) => T;
}

/** The `Intl` object of the subset. */
export const Intl = {
  DateTimeFormat: callable(DateTimeFormat),
  NumberFormat: callable(NumberFormat),
  getCanonicalLocales: (locales?: string | string[]): string[] => (locales === undefined ? [] : Array.isArray(locales) ? locales : [locales]),
};

/**
 * Makes the subset the global `Intl`, and `toLocaleString` (numbers,
 * bigints, dates) and `toLocaleDateString`/`toLocaleTimeString` use it,
 * unless the runtime has an `Intl` of its own.
 */
export function installIntl(): void {
  const global = globalThis as { Intl?: { DateTimeFormat?: unknown } };
  if (global.Intl?.DateTimeFormat) return;
  Object.defineProperty(globalThis, "Intl", { value: Intl, writable: true, configurable: true });
  const define = (target: object, name: string, method: (this: never, ...args: never[]) => string) =>
    Object.defineProperty(target, name, { value: method, writable: true, configurable: true });
  define(Number.prototype, "toLocaleString", function (this: number, locales?: string | string[], options?: NumberFormatOptions) {
    return new NumberFormat(locales, options).format(Number(this));
  });
  define(BigInt.prototype, "toLocaleString", function (this: bigint, locales?: string | string[], options?: NumberFormatOptions) {
    return new NumberFormat(locales, options).format(BigInt(this));
  });
  const withDefaults = (options: DateTimeFormatOptions | undefined, defaults: DateTimeFormatOptions) =>
    options && (FIELDS.some((field) => options[field] !== undefined) || options.dateStyle || options.timeStyle)
      ? options
      : { ...defaults, ...options };
  const date = { year: "numeric", month: "numeric", day: "numeric" } as const;
  const time = { hour: "numeric", minute: "2-digit", second: "2-digit" } as const;
  define(Date.prototype, "toLocaleString", function (this: Date, locales?: string | string[], options?: DateTimeFormatOptions) {
    return new DateTimeFormat(locales, withDefaults(options, { ...date, ...time })).format(this);
  });
  define(Date.prototype, "toLocaleDateString", function (this: Date, locales?: string | string[], options?: DateTimeFormatOptions) {
    return new DateTimeFormat(locales, withDefaults(options, date)).format(this);
  });
  define(Date.prototype, "toLocaleTimeString", function (this: Date, locales?: string | string[], options?: DateTimeFormatOptions) {
    return new DateTimeFormat(locales, withDefaults(options, time)).format(this);
  });
}
