//! The trigram index behind `GET /v1/messages?q=` (core's `message_search`): for every
//! distinct three-character window of a message's searched texts, lower-cased, an entry
//! `MSG_TRIGRAM ‖ ws ‖ trigram ‖ msg` with an empty value, so one trigram's messages walk
//! newest first like the status and recipient buckets.
//!
//! A text containing `q` contains every trigram of `q`, so the messages of any one of them
//! are candidates, and a candidate missing another of them is not a match: the list walks the
//! rarest bucket and checks the others with point reads before it loads a record, and the
//! record decides. A message's subject and recipients never change after its create, and no
//! message is ever deleted (retention keeps both), so the entries are written once, by the
//! create, and never moved.
//!
//! The create inserts them first, one plain insert each, before it takes the writer lock and
//! outside its redo record ([`insert_entries`]): they are about 60 of the create's 70 keys,
//! and in the locked batch they doubled the time the lock was held and were logged twice
//! (redo record, then the keys; bench/README.md, "sled: what the index costs a create").
//! That is safe because an entry only names a candidate that the list then loads and checks:
//! - a reader that sees the message sees its entries, inserted before it by the same thread;
//! - after a crash, sled recovers a prefix of its log (the redo record relies on the same),
//!   so a message that survived has its entries, which precede even its redo record;
//! - entries whose message was never written (a crash between the two, a create refused
//!   under the lock) name no record and are skipped by the list. An idempotent replay, the
//!   one refusal that is part of normal traffic, removes them again ([`remove_entries`]); a
//!   conflict does not, since its id may be a stored message's.
//!
//! Cost: one key per distinct trigram, about 60 for a 40-character subject and one address,
//! each some 40 bytes. Stores made before the index get their entries once at open
//! ([`build_search_index`]).

use std::collections::BTreeSet;

use sled::Tree;
use tidings_core::ids::{MessageId, WorkspaceId};
use tidings_core::message_search::{SearchText, fold, searched_texts};
use tidings_core::model::Message;
use tidings_core::ports::StoreResult;

use crate::codec::{bad_key, decode, sled_error};
use crate::layout::{self, Key};

/// Most trigrams of one search whose buckets a list looks at: spread over the text, they
/// narrow it as well as all of them would, and each costs a probe.
const MAX_QUERY_TRIGRAMS: usize = 8;

/// The distinct trigrams of `text` (already folded), in order of first appearance.
fn trigrams(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut seen = BTreeSet::new();
    chars.windows(3).map(|w| w.iter().collect::<String>()).filter(|t| seen.insert(t.clone())).collect()
}

/// `MSG_TRIGRAM ‖ ws ‖ trigram`: the bucket of one trigram.
pub fn bucket(ws: WorkspaceId, trigram: &str) -> Vec<u8> {
    Key::new(layout::MESSAGE_BY_TRIGRAM).id(ws.to_bytes()).text(trigram).0
}

/// The index keys of `message`: one per distinct trigram of its searched texts.
pub fn entries(message: &Message) -> Vec<Vec<u8>> {
    let mut all = BTreeSet::new();
    for text in searched_texts(message) {
        all.extend(trigrams(&fold(&text)));
    }
    let id = message.id.to_bytes();
    all.into_iter().map(|t| [bucket(message.workspace_id, &t), id.to_vec()].concat()).collect()
}

/// The buckets a search looks at: up to [`MAX_QUERY_TRIGRAMS`] of its trigrams, spread
/// evenly from its first to its last.
pub fn query_buckets(ws: WorkspaceId, text: &SearchText) -> Vec<Vec<u8>> {
    let all = trigrams(text.as_str());
    let picked: Vec<&String> = if all.len() <= MAX_QUERY_TRIGRAMS {
        all.iter().collect()
    } else {
        let last = all.len() - 1;
        let mut at: Vec<usize> = (0..MAX_QUERY_TRIGRAMS).map(|i| i * last / (MAX_QUERY_TRIGRAMS - 1)).collect();
        at.dedup();
        at.into_iter().filter_map(|i| all.get(i)).collect()
    };
    picked.into_iter().map(|t| bucket(ws, t)).collect()
}

/// Inserts a create's index entries (see the module doc): before its writer-lock section,
/// each a plain insert (sled orders them before the create's own writes in its log), so that
/// other writers are not held up by them.
pub fn insert_entries(tree: &Tree, entries: &[Vec<u8>]) -> StoreResult<()> {
    for entry in entries {
        tree.insert(entry.as_slice(), &[][..]).map_err(sled_error)?;
    }
    Ok(())
}

/// Removes the entries [`insert_entries`] made for a create that stored nothing (an
/// idempotent replay), unless a message is stored under `message_key` after all (ids are
/// minted fresh for each request, so that is a safeguard). One left behind by a crash is
/// harmless: it names no record.
pub fn remove_entries(tree: &Tree, message_key: &[u8], entries: &[Vec<u8>]) -> StoreResult<()> {
    if tree.contains_key(message_key).map_err(sled_error)? {
        return Ok(());
    }
    for entry in entries {
        tree.remove(entry.as_slice()).map_err(sled_error)?;
    }
    Ok(())
}

/// Whether `bucket` holds message `id`.
pub fn holds(tree: &Tree, bucket: &[u8], id: MessageId) -> StoreResult<bool> {
    tree.contains_key([bucket, &id.to_bytes()].concat()).map_err(sled_error)
}

/// Marks that every message has its trigram entries.
const SEARCH_INDEX_BUILT: &str = "message-search-index";

/// Gives every message of a store made before the search index its entries, once: at open,
/// before anything else writes (as `build_id_index` does), the marker last, so a crash
/// midway starts over at the next open (entries are idempotent). O(messages), once, while
/// the open waits: for a store of millions that first open takes minutes (not measured; some
/// 60 inserts per message). A new store marks itself at once. Returns how many messages it
/// indexed.
pub fn build_search_index(tree: &Tree) -> StoreResult<usize> {
    let marker = layout::meta(SEARCH_INDEX_BUILT).0;
    if tree.contains_key(&marker).map_err(sled_error)? {
        return Ok(0);
    }
    let mut indexed = 0;
    for entry in tree.scan_prefix([layout::MESSAGE]) {
        let (key, value) = entry.map_err(sled_error)?;
        if layout::id_at(&key, 17).is_none() {
            return Err(bad_key("message"));
        }
        let message: Message = decode(&value, "message")?;
        let mut batch = sled::Batch::default();
        for entry in entries(&message) {
            batch.insert(entry, &[][..]);
        }
        tree.apply_batch(batch).map_err(sled_error)?;
        indexed += 1;
    }
    tree.insert(marker, &[][..]).map_err(sled_error)?;
    Ok(indexed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trigrams_are_windows_of_characters_each_once() {
        assert_eq!(trigrams("abcab"), ["abc", "bca", "cab"]);
        assert_eq!(trigrams("aaaa"), ["aaa"]);
        assert_eq!(trigrams("äöüß"), ["äöü", "öüß"], "characters, not bytes");
        assert!(trigrams("ab").is_empty());
    }

    #[test]
    fn a_long_search_looks_at_eight_trigrams_from_first_to_last() {
        let ws = WorkspaceId::NONE;
        let text = SearchText::parse("abcdefghijklmnopqrstuvwxyz").unwrap();
        let buckets = query_buckets(ws, &text);
        assert_eq!(buckets.len(), MAX_QUERY_TRIGRAMS);
        assert_eq!(buckets.first(), Some(&bucket(ws, "abc")));
        assert_eq!(buckets.last(), Some(&bucket(ws, "xyz")));
    }
}
