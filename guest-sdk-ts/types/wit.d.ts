/// <reference path="./interfaces/ctxbox-engine-engine.d.ts" />
/// <reference path="./interfaces/ctxbox-engine-history.d.ts" />
/// <reference path="./interfaces/ctxbox-engine-host.d.ts" />
/// <reference path="./interfaces/ctxbox-engine-sql.d.ts" />
/// <reference path="./interfaces/ctxbox-engine-tools.d.ts" />
/// <reference path="./interfaces/ctxbox-engine-types.d.ts" />
declare module 'ctxbox:engine/context-engine-with-tools@0.1.0' {
  export type * as CtxboxEngineHistory010 from 'ctxbox:engine/history@0.1.0'; // import ctxbox:engine/history@0.1.0
  export type * as CtxboxEngineHost010 from 'ctxbox:engine/host@0.1.0'; // import ctxbox:engine/host@0.1.0
  export type * as CtxboxEngineSql010 from 'ctxbox:engine/sql@0.1.0'; // import ctxbox:engine/sql@0.1.0
  export type * as CtxboxEngineTypes010 from 'ctxbox:engine/types@0.1.0'; // import ctxbox:engine/types@0.1.0
  export * as tools from 'ctxbox:engine/tools@0.1.0'; // export ctxbox:engine/tools@0.1.0
  export * as engine from 'ctxbox:engine/engine@0.1.0'; // export ctxbox:engine/engine@0.1.0
}
