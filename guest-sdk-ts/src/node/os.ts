/**
 * `node:os` for a sandboxed engine: a machine of its own, not the host's.
 * `homedir()` is `/home/engine` and `tmpdir()` `/tmp` (paths only: the
 * engine has no filesystem), one CPU, Linux on wasm32, `\n` line ends.
 */

export const EOL = "\n";
export const devNull = "/dev/null";

export const homedir = (): string => "/home/engine";
export const tmpdir = (): string => "/tmp";
export const hostname = (): string => "ctxbox-engine";
export const platform = (): string => "linux";
export const type = (): string => "Linux";
export const arch = (): string => "wasm32";
export const machine = (): string => "wasm32";
export const release = (): string => "0.0.0";
export const version = (): string => "ctxbox sandbox";
export const endianness = (): "LE" => "LE";
export const uptime = (): number => 0;
export const loadavg = (): number[] => [0, 0, 0];
export const totalmem = (): number => 0;
export const freemem = (): number => 0;
export const availableParallelism = (): number => 1;
export const cpus = (): { model: string; speed: number; times: Record<string, number> }[] => [
  { model: "wasm32", speed: 0, times: { user: 0, nice: 0, sys: 0, idle: 0, irq: 0 } },
];
export const networkInterfaces = (): Record<string, never> => ({});
export const userInfo = (): { username: string; uid: number; gid: number; shell: null; homedir: string } => ({
  username: "engine",
  uid: 0,
  gid: 0,
  shell: null,
  homedir: homedir(),
});

export default {
  EOL, devNull, homedir, tmpdir, hostname, platform, type, arch, machine, release, version, endianness, uptime,
  loadavg, totalmem, freemem, availableParallelism, cpus, networkInterfaces, userInfo,
};
