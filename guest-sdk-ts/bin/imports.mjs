// The host's load-time checks on a component's world (host/src/sandbox/load.rs,
// `refusal` and `check_imports`), applied to the WIT text `jco wit` prints.

/** The contract package and the one version this SDK and the host speak. */
export const CONTRACT_PACKAGE = "ctxbox:engine";
export const CONTRACT_VERSION = "0.1.0";

/**
 * The world engines are componentized against: `context-engine` and the
 * optional `tools` export (an engine without tools answers an empty list).
 * Its imports are the host's, `complete` and `index-*` included: functions of
 * `ctxbox:engine/host@0.1.0`, which the grant below covers as a whole (a host
 * without one of them refuses the component at load, naming it).
 */
export const WORLD = "context-engine-with-tools";

/** Why the sandbox refuses an import, or undefined when it grants it. */
export function refusal(name) {
  const iface = name.split("@")[0];
  const pkg = iface.includes("/") ? iface.slice(0, iface.indexOf("/")) : iface;
  switch (pkg) {
    case "wasi:io":
    case "wasi:clocks":
    case "wasi:random":
    case "wasi:cli":
    case CONTRACT_PACKAGE:
      return undefined;
    case "wasi:filesystem":
      return "engines get no filesystem; keep state with host.state-set";
    case "wasi:sockets":
    case "wasi:http":
      return "engines get no network access";
    default:
      return "it is not part of the ctxbox sandbox";
  }
}

/** The top-level `import` and `export` names of the world in `jco wit` output. */
export function worldItems(witText) {
  const items = { imports: [], exports: [] };
  for (const line of witText.split("\n")) {
    const match = /^ {2}(import|export) ([^;{:\s]+(?::[^;{\s]+)?);$/.exec(line);
    if (match) items[match[1] === "import" ? "imports" : "exports"].push(match[2]);
  }
  return items;
}

/**
 * Every reason the host would refuse a component with this world (empty:
 * accepted). Exports other than `engine` (such as `tools`) are optional.
 */
export function checkWorld(witText) {
  const { imports, exports } = worldItems(witText);
  const problems = [];
  for (const name of imports) {
    const why = refusal(name);
    if (why) problems.push(`refused import ${name}: ${why}`);
    if (name.startsWith(CONTRACT_PACKAGE) && !name.endsWith(`@${CONTRACT_VERSION}`)) {
      problems.push(`import ${name} is not contract version ${CONTRACT_VERSION}`);
    }
  }
  const wanted = `${CONTRACT_PACKAGE}/engine@${CONTRACT_VERSION}`;
  if (!exports.includes(wanted)) {
    problems.push(`the component does not export ${wanted} (it exports: ${exports.join(", ") || "nothing"})`);
  }
  return problems;
}
