//! The example engines compiled into this build (feature `bundled-engines`),
//! so they can be named by id instead of by path.

/// Every bundled engine as (crate name, component bytes).
pub const ENGINES: &[(&str, &[u8])] = include!(concat!(env!("OUT_DIR"), "/bundled.rs"));

/// The component bytes of the bundled engine `name` (e.g. `keep-recent`).
pub fn engine(name: &str) -> Option<&'static [u8]> {
    ENGINES
        .iter()
        .find(|(bundled, _)| *bundled == name)
        .map(|(_, bytes)| *bytes)
}
