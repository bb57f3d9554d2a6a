//! The example engines compiled into this build (feature `bundled-engines`),
//! so they can be named by id instead of by path, and the probe engines
//! `ctxbox bench` measures with. Both lists are empty without the feature.

/// Every bundled engine as (crate name, component bytes).
pub const ENGINES: &[(&str, &[u8])] = include!(concat!(env!("OUT_DIR"), "/bundled.rs"));

/// Engines that exist only to be measured (never registered).
pub const PROBES: &[(&str, &[u8])] = include!(concat!(env!("OUT_DIR"), "/probes.rs"));

/// The component bytes of the bundled engine `name` (e.g. `keep-recent`).
pub fn engine(name: &str) -> Option<&'static [u8]> {
    find(ENGINES, name)
}

/// The component bytes of the probe `name` (e.g. `history-reader`).
pub fn probe(name: &str) -> Option<&'static [u8]> {
    find(PROBES, name)
}

fn find(list: &[(&str, &'static [u8])], name: &str) -> Option<&'static [u8]> {
    list.iter()
        .find(|(bundled, _)| *bundled == name)
        .map(|(_, bytes)| *bytes)
}
