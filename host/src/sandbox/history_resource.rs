//! The `history` resource: a host [`History`] snapshot lent to one call, and
//! the host side of its methods. Each answers from the snapshot without
//! copying more than it returns.

use wasmtime::component::Resource;

use super::bindings::ctxbox::engine::{history as wit_history, types as wit};
use super::convert;
use super::store::StoreState;
use super::wire_size;
use crate::contract::history::History;
use crate::contract::packed::PackedWriter;
use crate::contract::types::MessageEntry;

/// What a `history` handle in the resource table points at.
pub struct HistoryHandle(pub(crate) History);

impl StoreState {
    fn lent_history(&self, handle: &Resource<HistoryHandle>) -> wasmtime::Result<&History> {
        Ok(&self.table.get(handle)?.0)
    }

    /// The entries of `start..end` (clamped) one call may copy into the
    /// guest: whole entries up to the byte cap, and always at least one;
    /// with each one's approximate size ([`wire_size`]).
    fn page(
        &self,
        handle: &Resource<HistoryHandle>,
        start: u32,
        end: u32,
    ) -> wasmtime::Result<(&[MessageEntry], Vec<usize>)> {
        let page_limit = self.config.max_range_kib.saturating_mul(1024) as usize;
        let entries = self.lent_history(handle)?.entries();
        let end = (end as usize).min(entries.len());
        let start = (start as usize).min(end);
        let mut bytes = 0usize;
        let mut sizes = Vec::new();
        for entry in &entries[start..end] {
            let size = wire_size::entry(entry);
            if bytes + size > page_limit && !sizes.is_empty() {
                break;
            }
            bytes += size;
            sizes.push(size);
        }
        Ok((&entries[start..start + sizes.len()], sizes))
    }
}

impl wit_history::Host for StoreState {}

impl wit_history::HostHistory for StoreState {
    fn len(&mut self, this: Resource<HistoryHandle>) -> wasmtime::Result<u32> {
        Ok(self.lent_history(&this)?.len() as u32)
    }

    fn entry(
        &mut self,
        this: Resource<HistoryHandle>,
        index: u32,
    ) -> wasmtime::Result<Option<wit::MessageEntry>> {
        Ok(self
            .lent_history(&this)?
            .entry(index as usize)
            .map(convert::to_wit_entry))
    }

    fn range(
        &mut self,
        this: Resource<HistoryHandle>,
        start: u32,
        end: u32,
    ) -> wasmtime::Result<Vec<wit::MessageEntry>> {
        Ok(self
            .page(&this, start, end)?
            .0
            .iter()
            .map(convert::to_wit_entry)
            .collect())
    }

    fn packed_range(
        &mut self,
        this: Resource<HistoryHandle>,
        start: u32,
        end: u32,
    ) -> wasmtime::Result<Vec<u8>> {
        // The wire size is close to the encoded size: the page rarely grows.
        let (page, sizes) = self.page(&this, start, end)?;
        let mut packed = PackedWriter::with_capacity(sizes.iter().sum());
        for (entry, size) in page.iter().zip(sizes) {
            packed.push(entry, size);
        }
        Ok(packed.finish())
    }

    fn kind(
        &mut self,
        this: Resource<HistoryHandle>,
        index: u32,
    ) -> wasmtime::Result<Option<wit::MessageKind>> {
        Ok(self
            .lent_history(&this)?
            .kind(index as usize)
            .map(convert::to_wit_kind))
    }

    fn tool_pairing(
        &mut self,
        this: Resource<HistoryHandle>,
        index: u32,
    ) -> wasmtime::Result<Option<wit_history::ToolPairing>> {
        Ok(self
            .lent_history(&this)?
            .tool_pairing(index as usize)
            .map(convert::to_wit_pairing))
    }

    fn find(
        &mut self,
        this: Resource<HistoryHandle>,
        entry_id: String,
    ) -> wasmtime::Result<Option<u32>> {
        self.charge(entry_id.len())?;
        Ok(self
            .lent_history(&this)?
            .find(&entry_id)
            .map(|index| index as u32))
    }

    fn tokens(
        &mut self,
        this: Resource<HistoryHandle>,
        start: u32,
        end: u32,
    ) -> wasmtime::Result<u64> {
        Ok(self
            .lent_history(&this)?
            .tokens(start as usize..end as usize))
    }

    fn fitting_suffix(
        &mut self,
        this: Resource<HistoryHandle>,
        max_tokens: u64,
    ) -> wasmtime::Result<u32> {
        Ok(self.lent_history(&this)?.fitting_suffix(max_tokens) as u32)
    }

    fn drop(&mut self, this: Resource<HistoryHandle>) -> wasmtime::Result<()> {
        self.table.delete(this)?;
        Ok(())
    }
}
