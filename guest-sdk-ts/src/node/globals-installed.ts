/**
 * Installs the Node globals (`installNodeGlobals`, see globals.ts) when
 * imported: a side-effect module for the first import of a generated
 * entry, so the globals exist before any later module's body runs (ES
 * modules evaluate their imports in order).
 */
import { installNodeGlobals } from "./globals.js";

installNodeGlobals();
