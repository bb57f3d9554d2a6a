//! Sandbox limits (`sandbox.*` in `ctxbox.toml`).

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::error::SandboxError;
use crate::contract::failure::Operation;

/// Limits and sizes of the wasm sandbox. Every limit applies per engine
/// instance (one instance per session per engine) or per call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct SandboxConfig {
    /// Engine instances alive at once across all engines (pool slots). Idle
    /// instances are recycled when the pool is full.
    pub max_instances: u32,
    /// Memory budget of one instance, all its linear memories together, MiB.
    pub memory_limit_mib: u64,
    /// Wasm stack of one call, KiB.
    pub max_wasm_stack_kib: u32,
    /// Wall-clock deadline of one call (compaction has its own), ms.
    pub call_timeout_ms: u64,
    /// One compaction window, seconds. Not a key of its own: the host sets it
    /// from the reference's `agents.defaults.compaction.timeoutSeconds`.
    #[serde(skip)]
    pub compaction_timeout_seconds: u64,
    /// Windows a compaction may be extended to by progress reports.
    pub compaction_max_windows: u32,
    /// Wall-clock deadline of `dispose`, ms: short, since an instance is
    /// disposed while a caller may be waiting for its slot.
    pub dispose_timeout_ms: u64,
    /// Time an aborted call gets to notice `aborted()` and return, ms.
    pub abort_grace_ms: u64,
    /// How long before a call's deadline `host.aborted()` turns true, ms, so
    /// an engine can stop and answer before the host interrupts it; at most
    /// a quarter of the call's time. Host services the engine waits on
    /// (`summarize`, `complete`) end by then too.
    pub deadline_notice_ms: u64,
    /// Fuel (roughly, wasm instructions) per call.
    pub fuel_per_call: u64,
    /// Fuel of one `compact` (or `after-turn`) call.
    pub fuel_per_compaction: u64,
    /// Fuel to instantiate an engine (its start-up code).
    pub fuel_per_instantiation: u64,
    /// Largest answer an engine may return, KiB.
    pub max_output_kib: u64,
    /// Bytes an engine may pass to host functions in one call, KiB.
    pub max_input_kib_per_call: u64,
    /// Bytes one `history.range` call copies into the guest at most, KiB.
    pub max_range_kib: u64,
    /// Resource handles (WASI streams, pollables…) an instance may hold.
    pub max_handles: u32,
    /// Log records an engine may write per call; further ones are dropped,
    /// and a call writing 100 times this many fails with `host-limit`.
    pub max_log_records_per_call: u32,
    /// Longest log record, bytes; longer ones are truncated.
    pub max_log_message_bytes: u32,
    /// Bytes of guest stdout/stderr kept (the newest), per stream.
    pub stdio_tail_bytes: u32,
    /// Calls after which an instance is replaced by a fresh one.
    pub recycle_after_calls: u64,
    /// Largest component the host reads, KiB.
    pub max_component_kib: u64,
    /// Longest a component may take to compile, ms.
    pub compile_timeout_ms: u64,
    /// Where compiled engines are cached; `None` disables the cache.
    pub cache_dir: Option<PathBuf>,
    /// Fuel and wall-clock guards. Not a configuration key: only benches turn
    /// them off, to measure what they cost. Without them an engine can hang
    /// the host.
    #[serde(skip)]
    pub guards: bool,
    /// The largest memory an engine's own limits allow
    /// (`plugins.entries.<id>.limits.memoryLimitMib`), MiB: the instance
    /// pool lets a memory grow that far when it is above `memoryLimitMib`,
    /// and each instance's budget holds it to its engine's limit. Not a key
    /// of its own: set by [`SandboxConfig::with_room_for`].
    #[serde(skip)]
    pub largest_engine_memory_mib: Option<u64>,
}

/// One engine's own call limits (`plugins.entries.<id>.limits`), in place of
/// the `sandbox.*` ones for that engine alone: an operator gives an engine
/// that needs it (an OpenClaw plugin whose JavaScript hashes and scans in the
/// guest's interpreter) more fuel, time or memory without raising every
/// engine's.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct EngineLimits {
    /// Fuel of one plain call, in place of `sandbox.fuelPerCall`.
    pub fuel_per_call: Option<u64>,
    /// Fuel of one compaction (or `after-turn`), in place of
    /// `sandbox.fuelPerCompaction`.
    pub fuel_per_compaction: Option<u64>,
    /// Wall-clock deadline of one plain call, ms, in place of
    /// `sandbox.callTimeoutMs`.
    pub call_timeout_ms: Option<u64>,
    /// Memory of one instance of the engine, MiB, in place of
    /// `sandbox.memoryLimitMib`.
    pub memory_limit_mib: Option<u64>,
}

impl EngineLimits {
    /// Whether every limit is left to the sandbox's.
    pub fn is_empty(&self) -> bool {
        self == &Self::default()
    }

    /// Checks that every limit set is usable; the error names the key under
    /// `plugins.entries.<id>.limits`.
    pub fn validate(&self) -> Result<(), String> {
        let set = [
            ("fuelPerCall", self.fuel_per_call),
            ("fuelPerCompaction", self.fuel_per_compaction),
            ("callTimeoutMs", self.call_timeout_ms),
            ("memoryLimitMib", self.memory_limit_mib),
        ];
        if let Some((key, _)) = set.iter().find(|(_, value)| *value == Some(0)) {
            return Err(format!("`{key}` must be greater than zero"));
        }
        match self.memory_limit_mib {
            Some(mib) if mib > MAX_MEMORY_MIB => Err(format!(
                "`memoryLimitMib` is {mib} but a 32-bit wasm memory holds at most {MAX_MEMORY_MIB}"
            )),
            _ => Ok(()),
        }
    }
}

impl Default for SandboxConfig {
    fn default() -> Self {
        Self {
            max_instances: 1_000,
            memory_limit_mib: 64,
            max_wasm_stack_kib: 512,
            call_timeout_ms: 10_000,
            compaction_timeout_seconds: 180,
            compaction_max_windows: 10,
            dispose_timeout_ms: 500,
            abort_grace_ms: 100,
            deadline_notice_ms: 1_000,
            fuel_per_call: 2_000_000_000,
            fuel_per_compaction: 40_000_000_000,
            fuel_per_instantiation: 200_000_000,
            max_output_kib: 16 * 1024,
            max_input_kib_per_call: 64 * 1024,
            max_range_kib: 4 * 1024,
            max_handles: 1_000,
            max_log_records_per_call: 100,
            max_log_message_bytes: 4_096,
            stdio_tail_bytes: 8_192,
            recycle_after_calls: 10_000,
            max_component_kib: 256 * 1024,
            compile_timeout_ms: 120_000,
            cache_dir: None,
            guards: true,
            largest_engine_memory_mib: None,
        }
    }
}

impl SandboxConfig {
    /// Checks that every limit is usable; the error names the key.
    pub fn validate(&self) -> Result<(), SandboxError> {
        let positive: [(&str, u64); 15] = [
            ("sandbox.maxInstances", self.max_instances.into()),
            ("sandbox.memoryLimitMib", self.memory_limit_mib),
            ("sandbox.maxWasmStackKib", self.max_wasm_stack_kib.into()),
            ("sandbox.callTimeoutMs", self.call_timeout_ms),
            ("sandbox.disposeTimeoutMs", self.dispose_timeout_ms),
            ("sandbox.maxComponentKib", self.max_component_kib),
            ("sandbox.compileTimeoutMs", self.compile_timeout_ms),
            (
                "agents.defaults.compaction.timeoutSeconds",
                self.compaction_timeout_seconds,
            ),
            (
                "sandbox.compactionMaxWindows",
                self.compaction_max_windows.into(),
            ),
            ("sandbox.fuelPerCall", self.fuel_per_call),
            ("sandbox.fuelPerCompaction", self.fuel_per_compaction),
            ("sandbox.fuelPerInstantiation", self.fuel_per_instantiation),
            ("sandbox.maxOutputKib", self.max_output_kib),
            ("sandbox.maxRangeKib", self.max_range_kib),
            ("sandbox.maxHandles", self.max_handles.into()),
        ];
        if let Some((key, _)) = positive.iter().find(|(_, value)| *value == 0) {
            return Err(SandboxError::Setting {
                key,
                problem: "must be greater than zero".into(),
            });
        }
        if self.memory_limit_mib > MAX_MEMORY_MIB {
            return Err(SandboxError::Setting {
                key: "sandbox.memoryLimitMib",
                problem: format!(
                    "is {} but a 32-bit wasm memory holds at most {MAX_MEMORY_MIB}",
                    self.memory_limit_mib
                ),
            });
        }
        if self.max_wasm_stack_kib > 64 * 1024 {
            return Err(SandboxError::Setting {
                key: "sandbox.maxWasmStackKib",
                problem: format!(
                    "is {} but at most 65536 is allowed",
                    self.max_wasm_stack_kib
                ),
            });
        }
        Ok(())
    }

    /// These limits with `engine`'s own in place of the sandbox's.
    pub fn with_engine_limits(&self, engine: &EngineLimits) -> SandboxConfig {
        SandboxConfig {
            fuel_per_call: engine.fuel_per_call.unwrap_or(self.fuel_per_call),
            fuel_per_compaction: engine
                .fuel_per_compaction
                .unwrap_or(self.fuel_per_compaction),
            call_timeout_ms: engine.call_timeout_ms.unwrap_or(self.call_timeout_ms),
            memory_limit_mib: engine.memory_limit_mib.unwrap_or(self.memory_limit_mib),
            ..self.clone()
        }
    }

    /// These limits with the instance pool sized for the largest memory any
    /// of `engines`' own limits allow.
    pub fn with_room_for<'a>(
        &self,
        engines: impl IntoIterator<Item = &'a EngineLimits>,
    ) -> SandboxConfig {
        SandboxConfig {
            largest_engine_memory_mib: engines
                .into_iter()
                .filter_map(|limits| limits.memory_limit_mib)
                .max(),
            ..self.clone()
        }
    }

    /// The instance memory budget in bytes.
    pub fn memory_limit_bytes(&self) -> usize {
        mib_to_bytes(self.memory_limit_mib)
    }

    /// How far the instance pool lets one memory grow, in bytes: the
    /// largest budget of any engine (each instance's own budget holds it to
    /// less).
    pub fn pool_memory_limit_bytes(&self) -> usize {
        mib_to_bytes(
            self.largest_engine_memory_mib
                .unwrap_or(0)
                .max(self.memory_limit_mib),
        )
    }

    /// Fuel of one call of `operation`.
    pub fn fuel_for(&self, operation: Operation) -> u64 {
        match operation {
            Operation::Load => self.fuel_per_instantiation,
            operation if operation.may_compact() => self.fuel_per_compaction,
            _ => self.fuel_per_call,
        }
    }

    /// The plain call deadline.
    pub fn call_timeout(&self) -> Duration {
        Duration::from_millis(self.call_timeout_ms)
    }

    /// How long a component may take to compile.
    pub fn compile_timeout(&self) -> Duration {
        Duration::from_millis(self.compile_timeout_ms)
    }

    /// The deadline of `dispose`.
    pub fn dispose_timeout(&self) -> Duration {
        Duration::from_millis(self.dispose_timeout_ms)
    }

    /// One compaction window.
    pub fn compaction_window(&self) -> Duration {
        Duration::from_secs(self.compaction_timeout_seconds)
    }

    /// The abort grace period.
    pub fn abort_grace(&self) -> Duration {
        Duration::from_millis(self.abort_grace_ms)
    }

    /// The deadline notice of a call given `timeout` (before any progress
    /// re-arms it): `deadlineNoticeMs`, at most a quarter of `timeout`.
    pub fn deadline_notice(&self, timeout: Duration) -> Duration {
        Duration::from_millis(self.deadline_notice_ms).min(timeout / 4)
    }
}

/// The most a 32-bit wasm memory holds, MiB.
const MAX_MEMORY_MIB: u64 = 4 * 1024;

/// `mib` mebibytes in bytes.
fn mib_to_bytes(mib: u64) -> usize {
    (mib as usize) * 1024 * 1024
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid() {
        SandboxConfig::default()
            .validate()
            .expect("defaults validate");
    }

    #[test]
    fn a_zero_limit_is_refused_by_name() {
        let config = SandboxConfig {
            call_timeout_ms: 0,
            ..SandboxConfig::default()
        };
        let error = config.validate().expect_err("zero timeout refused");
        assert!(
            error.to_string().contains("sandbox.callTimeoutMs"),
            "{error}"
        );
    }

    #[test]
    fn the_pool_has_room_for_the_largest_engine_memory_and_each_engine_its_own() {
        let sandbox = SandboxConfig::default();
        let small = EngineLimits {
            memory_limit_mib: Some(32),
            ..EngineLimits::default()
        };
        let large = EngineLimits {
            memory_limit_mib: Some(512),
            ..EngineLimits::default()
        };
        let pooled = sandbox.with_room_for([&small, &large, &EngineLimits::default()]);
        assert_eq!(pooled.pool_memory_limit_bytes(), 512 << 20);
        assert_eq!(pooled.memory_limit_bytes(), 64 << 20, "others keep 64 MiB");
        assert_eq!(
            pooled.with_engine_limits(&small).memory_limit_bytes(),
            32 << 20
        );
        assert_eq!(
            pooled.with_engine_limits(&large).memory_limit_bytes(),
            512 << 20
        );
        let below = sandbox.with_room_for([&small]);
        assert_eq!(below.pool_memory_limit_bytes(), 64 << 20);
    }

    #[test]
    fn unknown_keys_are_refused() {
        let error = serde_json::from_str::<SandboxConfig>(r#"{"memoryLimit": 5}"#)
            .expect_err("unknown key refused");
        assert!(error.to_string().contains("memoryLimit"), "{error}");
    }
}
