//! `attachments`: files sent with a message, as ordinary attachments or, with a
//! `contentId`, as inline parts the HTML refers to with `cid:<contentId>`.
//!
//! Rules (each refusal names the field at fault):
//! - `filename`: 1–255 characters, no `/`, `\` or `:` (an NTFS alternate data stream,
//!   `x.exe::$DATA`), no control or invisible character ([`crate::text_checks`]: `x.exe\u{200B}`,
//!   `x.ex\u{AD}e`), not only dots and spaces, no RFC 2047 encoded-word
//!   ([`holds_encoded_word`]: `=?utf-8?q?invoice=2Eexe?=`, which mail programs show decoded);
//!   an executable extension ([`EXECUTABLE_EXTENSIONS`], judged by [`windows_extension`]) is
//!   refused.
//! - `contentType`: `type/subtype` of RFC 7230 token characters, optionally followed by one
//!   parameter, `charset` (`text/plain; charset=utf-8`; its value an RFC 2978 charset name,
//!   kept in lower case); no other parameter (Tidings writes `name=` itself). Stored as
//!   `type/subtype` or `type/subtype; charset=<value>`. The executable types in
//!   [`EXECUTABLE_TYPES`] are refused, with or without a charset. A `utf-8` or `us-ascii`
//!   charset must be true of the content (checked as it is decoded), since a receiver shows
//!   the text by it.
//! - `content`: standard base64 with padding, no whitespace. The stored form is the text as
//!   sent, so nothing is re-encoded per read; the MIME builder decodes it. The text is an
//!   [`AttachmentContent`], shared (not copied) between the request, the message and its
//!   copies, and checked by decoding it a slice at a time (a 40 MiB send used to hold
//!   several copies of its attachments at once).
//! - `contentId`: 1–250 characters of RFC 5322 `atext`, `.` and `@`, without angle brackets
//!   (Tidings writes `Content-ID: <id>`).

use std::sync::Arc;

use base64::Engine as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::text_checks::{is_invisible, is_line_or_control};

/// Most attachments on one message.
pub const MAX_ATTACHMENTS: usize = 100;
/// Most base64 characters of all attachments of one message together (40 MiB).
pub const MAX_ATTACHMENTS_ENCODED_BYTES: usize = 40 * 1024 * 1024;
/// Longest filename, in characters.
pub const MAX_FILENAME_CHARS: usize = 255;
/// Longest content id.
pub const MAX_CONTENT_ID: usize = 250;
/// Longest charset name (IANA's longest registered name has 45 characters).
pub const MAX_CHARSET: usize = 64;

/// Extensions refused because the file runs code, installs something or mounts a disk when
/// opened on a common desktop: the union of what Gmail and Resend refuse to send and what
/// Postmark documents as forbidden, less `bin` and `tmp` (plain data that nothing opens by
/// itself; docs/decisions.md, "Hardening: filenames"). Compared without ASCII case, after
/// [`windows_extension`] has made the name what Windows would see.
pub const EXECUTABLE_EXTENSIONS: &[&str] = &[
    "ade",
    "adp",
    "apk",
    "app",
    "application",
    "appx",
    "appxbundle",
    "asp",
    "bas",
    "bat",
    "cab",
    "cer",
    "chm",
    "cmd",
    "com",
    "cpl",
    "crt",
    "csh",
    "der",
    "diagcab",
    "diagcfg",
    "diagpkg",
    "dll",
    "dmg",
    "ex",
    "ex_",
    "exe",
    "fxp",
    "gadget",
    "hlp",
    "hta",
    "img",
    "inf",
    "ins",
    "iso",
    "isp",
    "its",
    "jar",
    "jnlp",
    "js",
    "jse",
    "ksh",
    "lib",
    "lnk",
    "mad",
    "maf",
    "mag",
    "mam",
    "maq",
    "mar",
    "mas",
    "mat",
    "mau",
    "mav",
    "maw",
    "mda",
    "mdb",
    "mde",
    "mdt",
    "mdw",
    "mdz",
    "mjs",
    "msc",
    "msh",
    "msh1",
    "msh1xml",
    "msh2",
    "msh2xml",
    "mshxml",
    "msi",
    "msix",
    "msixbundle",
    "msp",
    "mst",
    "nsh",
    "ops",
    "pcd",
    "pif",
    "plg",
    "prf",
    "prg",
    "ps1",
    "ps1xml",
    "ps2",
    "ps2xml",
    "psc1",
    "psc2",
    "psm1",
    "reg",
    "scf",
    "scr",
    "sct",
    "shb",
    "shs",
    "sys",
    "url",
    "vb",
    "vba",
    "vbe",
    "vbs",
    "vhd",
    "vps",
    "vsmacros",
    "vss",
    "vst",
    "vsw",
    "vxd",
    "ws",
    "wsc",
    "wsf",
    "wsh",
    "wsl",
    "xll",
    "xnk",
];

/// Content types of executables and scripts; compared without case.
pub const EXECUTABLE_TYPES: &[&str] = &[
    "application/x-msdownload",
    "application/x-msdos-program",
    "application/x-ms-installer",
    "application/x-msi",
    "application/x-dosexec",
    "application/x-executable",
    "application/vnd.microsoft.portable-executable",
    "application/x-sh",
    "application/x-csh",
    "application/x-bat",
    "application/x-powershell",
    "application/java-archive",
    "application/x-java-archive",
    "application/hta",
    "application/x-ms-shortcut",
    "application/javascript",
    "application/x-javascript",
    "text/javascript",
    "application/x-vbscript",
    "text/vbscript",
];

/// Why an attachment was refused; [`AttachmentError::field`] names the JSON field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AttachmentError {
    /// Empty, too long, a path, an NTFS stream (`:`), only dots and spaces, or a control or
    /// invisible character.
    #[error(
        "must be 1 to {MAX_FILENAME_CHARS} characters without '/', '\\', ':', control or invisible (format) characters, and not only dots and spaces"
    )]
    Filename,
    /// An executable extension.
    #[error("executable files (.{0}) cannot be attached")]
    ExecutableFilename(String),
    /// An RFC 2047 encoded-word (`=?charset?Q?...?=`), which mail programs would show
    /// decoded, as another name than the one judged.
    #[error(
        "must be the file name as plain text, not an RFC 2047 encoded-word (=?charset?Q?...?=): Tidings encodes the name itself"
    )]
    EncodedWord,
    /// Not `type/subtype`, or `type/subtype; charset=...` badly written.
    #[error(
        "must be a MIME type such as application/pdf or text/plain; charset=utf-8 (type/subtype, optionally with a charset parameter)"
    )]
    ContentType,
    /// A parameter other than `charset`, or a second parameter.
    #[error("only a charset parameter may follow the type (not {0:?}): Tidings writes the file name (name=) itself")]
    Parameter(String),
    /// A charset value that is not an RFC 2978 charset name.
    #[error("the charset must be 1 to {MAX_CHARSET} letters, digits and !#$%&'+-^_`{{}}~ (e.g. charset=utf-8)")]
    Charset,
    /// The content does not decode in the charset it declares (`utf-8` or `us-ascii`).
    #[error("is not {0} text, as its contentType's charset says")]
    NotInCharset(String),
    /// An executable content type.
    #[error("executable content ({0}) cannot be attached")]
    ExecutableType(String),
    /// Not standard base64.
    #[error("must be standard base64 with padding and no whitespace: {0}")]
    Base64(String),
    /// A content id with characters outside `atext`, `.` and `@`, or too long.
    #[error(
        "must be 1 to {MAX_CONTENT_ID} characters of letters, digits, '.', '@' and !#$%&'*+-/=?^_`{{|}}~, without angle brackets"
    )]
    ContentId,
}

impl AttachmentError {
    /// The JSON field of the attachment at fault.
    pub fn field(&self) -> &'static str {
        match self {
            Self::Filename | Self::ExecutableFilename(_) | Self::EncodedWord => "filename",
            Self::ContentType | Self::Parameter(_) | Self::Charset | Self::ExecutableType(_) => "contentType",
            Self::Base64(_) | Self::NotInCharset(_) => "content",
            Self::ContentId => "contentId",
        }
    }
}

/// An attachment's base64 text as the client sent it. Cloning shares it; it serialises as a
/// plain JSON string, and `Debug` shows only its length.
#[derive(Clone, PartialEq, Eq, Hash, Default)]
pub struct AttachmentContent(Arc<String>);

impl AttachmentContent {
    /// The text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for AttachmentContent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AttachmentContent({} bytes)", self.0.len())
    }
}

impl From<String> for AttachmentContent {
    fn from(text: String) -> Self {
        Self(Arc::new(text))
    }
}

impl From<&str> for AttachmentContent {
    fn from(text: &str) -> Self {
        Self(Arc::new(text.to_owned()))
    }
}

impl From<&String> for AttachmentContent {
    fn from(text: &String) -> Self {
        Self::from(text.as_str())
    }
}

impl Serialize for AttachmentContent {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for AttachmentContent {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        // The decoded `String` is moved in, not copied.
        String::deserialize(deserializer).map(Self::from)
    }
}

/// One attachment, checked; built by [`Attachment::parse`].
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Attachment {
    filename: String,
    content_type: String,
    /// Standard base64, as sent.
    content: AttachmentContent,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    content_id: Option<String>,
    /// Decoded size in bytes.
    size: u64,
}

impl Attachment {
    /// Checks every part (see the module docs); the first fault found is returned.
    pub fn parse(
        filename: &str,
        content_type: &str,
        content: impl Into<AttachmentContent>,
        content_id: Option<&str>,
    ) -> Result<Self, AttachmentError> {
        check_filename(filename)?;
        let content_type = check_content_type(content_type)?;
        if let Some(id) = content_id {
            check_content_id(id)?;
        }
        let content = content.into();
        let charset = charset_of(&content_type);
        let mut text_check = match charset {
            Some("utf-8") => Some(TextCheck::utf8()),
            Some("us-ascii") => Some(TextCheck::ascii()),
            _ => None,
        };
        let size = decoded_size(content.as_str(), CHECK_SLICE, |bytes| {
            if let Some(check) = text_check.as_mut() {
                check.feed(bytes);
            }
        })
        .map_err(AttachmentError::Base64)?;
        if let (Some(check), Some(charset)) = (text_check, charset)
            && !check.finish()
        {
            return Err(AttachmentError::NotInCharset(charset.to_owned()));
        }
        Ok(Self {
            filename: filename.to_owned(),
            content_type,
            content,
            content_id: content_id.map(str::to_owned),
            size,
        })
    }

    /// The filename.
    pub fn filename(&self) -> &str {
        &self.filename
    }

    /// `type/subtype`, or `type/subtype; charset=<value>` when the client gave a charset.
    pub fn content_type(&self) -> &str {
        &self.content_type
    }

    /// `type/subtype` alone, in the case the client wrote it.
    pub fn essence(&self) -> &str {
        self.content_type.split_once(';').map_or(&self.content_type, |(essence, _)| essence)
    }

    /// The charset the client declared (lower case), if any.
    pub fn charset(&self) -> Option<&str> {
        charset_of(&self.content_type)
    }

    /// The content id of an inline part; `None` for an ordinary attachment.
    pub fn content_id(&self) -> Option<&str> {
        self.content_id.as_deref()
    }

    /// Decoded size in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Length of the base64 text, the measure of the 40 MiB limit.
    pub fn encoded_len(&self) -> usize {
        self.content.as_str().len()
    }

    /// The file's bytes.
    pub fn bytes(&self) -> Result<Vec<u8>, String> {
        base64::engine::general_purpose::STANDARD.decode(self.content.as_str()).map_err(|e| e.to_string())
    }
}

/// Base64 characters decoded at a time when checking a content (a multiple of 4).
const CHECK_SLICE: usize = 64 * 1024;

/// The decoded size of `content`, or why it is not standard padded base64, found by
/// decoding `slice` characters at a time into one small buffer rather than the whole file
/// into memory; `each` sees the decoded bytes piece by piece, in order. Invalid text is
/// decoded whole once more, so that the error (offsets included) is exactly a whole
/// decode's; only the refused pay for that.
fn decoded_size(content: &str, slice: usize, mut each: impl FnMut(&[u8])) -> Result<u64, String> {
    debug_assert!(slice > 0 && slice.is_multiple_of(4));
    let engine = base64::engine::general_purpose::STANDARD;
    let whole = || engine.decode(content).map(|d| d.len() as u64).map_err(|e| e.to_string());
    let bytes = content.as_bytes();
    let mut out = vec![0u8; slice / 4 * 3];
    let mut size = 0u64;
    let mut start = 0;
    while start < bytes.len() {
        let end = (start + slice).min(bytes.len());
        let part = &bytes[start..end];
        // Padding may only end the whole text; in an earlier slice it is misplaced.
        if end < bytes.len() && part.contains(&b'=') {
            return whole();
        }
        match engine.decode_slice(part, &mut out) {
            Ok(n) => {
                each(&out[..n]);
                size += n as u64;
            }
            Err(_) => return whole(),
        }
        start = end;
    }
    Ok(size)
}

fn check_filename(name: &str) -> Result<(), AttachmentError> {
    // Refused outright rather than stripped: a name that needs cleaning to be judged is not
    // one a legitimate sender writes, and the recipient would see the uncleaned one.
    let ok = name.chars().count() <= MAX_FILENAME_CHARS
        && !name.chars().any(|c| matches!(c, '/' | '\\' | ':') || is_line_or_control(c) || is_invisible(c))
        && !name.trim_end_matches(['.', ' ']).trim().is_empty();
    if !ok {
        return Err(AttachmentError::Filename);
    }
    if holds_encoded_word(name) {
        return Err(AttachmentError::EncodedWord);
    }
    match windows_extension(name) {
        Some(ext) if EXECUTABLE_EXTENSIONS.iter().any(|e| e.eq_ignore_ascii_case(ext)) => {
            Err(AttachmentError::ExecutableFilename(ext.to_ascii_lowercase()))
        }
        _ => Ok(()),
    }
}

/// Whether `name` holds an RFC 2047 encoded-word as the most lenient mail readers find one:
/// `=?`, a charset (possibly empty) up to the next `?`, `Q` or `B` in either case, `?`, then
/// anything up to a later `?=`. Python's `email.header` and Thunderbird decode such a word
/// anywhere in a value, quoted parameter values (RFC 2047 §5 forbids it there) and the
/// middle of a word (`invoice=?utf-8?q?=2Eexe?=`) included, so `filename="=?utf-8?q?
/// invoice=2Eexe?="` is shown and saved as `invoice.exe`.
///
/// Refused rather than decoded and judged: which charsets a reader knows, and whether it
/// decodes a malformed word, differ from reader to reader, so no one decoded reading is the
/// one every recipient sees. An API client has no reason to send one: `filename` is plain
/// Unicode, and Tidings writes it with RFC 2231 encoding where it needs encoding.
pub fn holds_encoded_word(name: &str) -> bool {
    let mut rest = name;
    while let Some(start) = rest.find("=?") {
        let after = &rest[start + 2..];
        if let Some(charset_end) = after.find('?') {
            let tail = &after[charset_end + 1..];
            let mut chars = tail.chars();
            if matches!(chars.next(), Some('q' | 'Q' | 'b' | 'B'))
                && chars.next() == Some('?')
                && tail[2..].contains("?=")
            {
                return true;
            }
        }
        rest = after;
    }
    false
}

/// The extension Windows opens `name` by: after the last `.`, once trailing dots and spaces
/// (which Windows drops, so `x.exe. ` opens as `x.exe`) are gone. `None` without a `.`.
/// Names holding `:` (an NTFS stream, `x.exe::$DATA`) never get here.
pub fn windows_extension(name: &str) -> Option<&str> {
    name.trim_end_matches(['.', ' ']).rsplit_once('.').map(|(_, ext)| ext)
}

fn is_token(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// `text` checked (module docs) and written the one way it is stored: `type/subtype` as the
/// client wrote it, then `; charset=<value in lower case>` when a charset was given. Space
/// and tab are allowed around the `;` and the `=`, and the value may be a quoted string.
fn check_content_type(text: &str) -> Result<String, AttachmentError> {
    if text.len() > 255 {
        return Err(AttachmentError::ContentType);
    }
    let (essence, parameters) = match text.split_once(';') {
        Some((essence, rest)) => (essence.trim_end_matches([' ', '\t']), Some(rest)),
        None => (text, None),
    };
    let Some((kind, subtype)) = essence.split_once('/') else { return Err(AttachmentError::ContentType) };
    if !is_token(kind) || !is_token(subtype) {
        return Err(AttachmentError::ContentType);
    }
    if EXECUTABLE_TYPES.iter().any(|t| t.eq_ignore_ascii_case(essence)) {
        return Err(AttachmentError::ExecutableType(essence.to_ascii_lowercase()));
    }
    let Some(parameters) = parameters else { return Ok(essence.to_owned()) };
    let Some((name, value)) = parameters.split_once('=') else { return Err(AttachmentError::ContentType) };
    let name = name.trim_matches([' ', '\t']);
    if !name.eq_ignore_ascii_case("charset") {
        return Err(AttachmentError::Parameter(name.to_owned()));
    }
    let value = value.trim_matches([' ', '\t']);
    let value = match value.strip_prefix('"') {
        Some(quoted) => quoted.strip_suffix('"').ok_or(AttachmentError::Charset)?,
        None => value,
    };
    if let Some((_, next)) = value.split_once(';') {
        let next = next.split_once('=').map_or(next, |(name, _)| name).trim_matches([' ', '\t']);
        return Err(AttachmentError::Parameter(next.to_owned()));
    }
    let charset_char = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'+-^_`{}~".contains(&b);
    if value.is_empty() || value.len() > MAX_CHARSET || !value.bytes().all(charset_char) {
        return Err(AttachmentError::Charset);
    }
    Ok(format!("{essence}; charset={}", value.to_ascii_lowercase()))
}

/// The charset of a stored content type (see [`check_content_type`]).
fn charset_of(content_type: &str) -> Option<&str> {
    content_type.split_once("; charset=").map(|(_, charset)| charset)
}

/// Whether bytes given piece by piece are, as a whole, UTF-8 (or ASCII): a character may be
/// split between two pieces.
struct TextCheck {
    ascii_only: bool,
    /// The start of a character the last piece ended in the middle of.
    carry: [u8; 4],
    carried: usize,
    valid: bool,
}

impl TextCheck {
    fn utf8() -> Self {
        Self { ascii_only: false, carry: [0; 4], carried: 0, valid: true }
    }

    fn ascii() -> Self {
        Self { ascii_only: true, ..Self::utf8() }
    }

    fn feed(&mut self, mut bytes: &[u8]) {
        if !self.valid {
            return;
        }
        if self.ascii_only {
            self.valid = bytes.is_ascii();
            return;
        }
        // Complete a carried character a byte at a time: four bytes are always either a
        // character or invalid.
        while self.carried > 0 {
            let Some((&first, rest)) = bytes.split_first() else { return };
            self.carry[self.carried] = first;
            self.carried += 1;
            bytes = rest;
            match std::str::from_utf8(&self.carry[..self.carried]) {
                Ok(_) => self.carried = 0,
                Err(e) if e.error_len().is_some() => {
                    self.valid = false;
                    return;
                }
                Err(_) => {}
            }
        }
        match std::str::from_utf8(bytes) {
            Ok(_) => {}
            Err(e) if e.error_len().is_none() => {
                let tail = &bytes[e.valid_up_to()..];
                self.carry[..tail.len()].copy_from_slice(tail);
                self.carried = tail.len();
            }
            Err(_) => self.valid = false,
        }
    }

    fn finish(self) -> bool {
        self.valid && self.carried == 0
    }
}

fn check_content_id(id: &str) -> Result<(), AttachmentError> {
    let ok = !id.is_empty()
        && id.len() <= MAX_CONTENT_ID
        && id.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-/=?^_`{|}~.@".contains(&b));
    if ok { Ok(()) } else { Err(AttachmentError::ContentId) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b64(bytes: &[u8]) -> String {
        base64::engine::general_purpose::STANDARD.encode(bytes)
    }

    proptest::proptest! {
        /// Checking a slice at a time gives exactly what decoding the whole text gives:
        /// the size, or the same error message (offsets included).
        #[test]
        fn slice_by_slice_checking_agrees_with_a_whole_decode(
            text in "[A-Za-z0-9+/=\\n .-]{0,64}",
            bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..64),
            cut in 0usize..80,
            slice in 1usize..6,
        ) {
            let encoded = b64(&bytes);
            let mut spliced = encoded.clone();
            spliced.insert_str(cut.min(encoded.len()), &text[..text.len().min(3)]);
            for candidate in [text.clone(), encoded, spliced] {
                let whole = base64::engine::general_purpose::STANDARD
                    .decode(&candidate)
                    .map(|d| d.len() as u64)
                    .map_err(|e| e.to_string());
                proptest::prop_assert_eq!(decoded_size(&candidate, slice * 4, |_| ()), whole, "{:?}", candidate);
            }
        }
    }

    #[test]
    fn a_good_attachment_keeps_its_parts_and_decodes() {
        let a = Attachment::parse("Invoice März.pdf", "application/pdf", b64(b"%PDF-1.7 \x00\xff"), None).unwrap();
        assert_eq!(
            (a.filename(), a.content_type(), a.content_id(), a.size()),
            ("Invoice März.pdf", "application/pdf", None, 11)
        );
        assert_eq!(a.bytes().unwrap(), b"%PDF-1.7 \x00\xff");
        let inline = Attachment::parse("logo.png", "image/png", b64(b"png"), Some("logo@acme")).unwrap();
        assert_eq!(inline.content_id(), Some("logo@acme"));
    }

    #[test]
    fn executables_are_refused_by_extension_and_by_type() {
        for name in
            ["setup.exe", "RUN.BAT", "a.tar.js", "x.ps1", "evil.exe.", "evil.exe  ", "lib.dll", "a.jar", "s.lnk"]
        {
            let err = Attachment::parse(name, "application/octet-stream", "", None).unwrap_err();
            assert!(matches!(err, AttachmentError::ExecutableFilename(_)), "{name}: {err:?}");
            assert_eq!(err.field(), "filename");
        }
        for ctype in ["application/x-msdownload", "Application/X-MSDOS-Program", "application/x-sh"] {
            let err = Attachment::parse("file.bin", ctype, "", None).unwrap_err();
            assert!(matches!(err, AttachmentError::ExecutableType(_)), "{ctype}: {err:?}");
            assert_eq!(err.field(), "contentType");
        }
        assert!(Attachment::parse("exe", "text/plain", "", None).is_ok(), "no extension, only the name exe");
        assert!(Attachment::parse("report.exe.pdf", "application/pdf", "", None).is_ok());
        for name in ["invoice.pdf.exe", "x.SCR", "x.Js", "x.iso", "x.msix", "x.url", "x.cpl", "x.hta", "x.wsf"] {
            let err = Attachment::parse(name, "application/octet-stream", "", None).unwrap_err();
            assert!(matches!(err, AttachmentError::ExecutableFilename(_)), "{name}: {err:?}");
        }
        for name in ["data.bin", "notes.tmp", "Zählerstand März 2026.pdf", "a.b.c.txt", "résumé (final).docx"] {
            assert!(Attachment::parse(name, "application/octet-stream", "", None).is_ok(), "{name}");
        }
    }

    #[test]
    fn names_that_hide_an_executable_extension_are_refused() {
        let hiding = [
            "x.exe\u{200B}",
            "x.ex\u{AD}e",
            "x.exe::$DATA",
            "x.exe:stream",
            "x.exe\u{FEFF}",
            "x\u{202E}fdp.exe",
            "invoice\u{202E}exe.pdf",
            "x.e\u{2060}xe",
            "x.exe\u{180E}",
            "x.exe\u{3164}",
            "x.exe\u{85}",
            "x.exe\u{2028}",
            "x.exe\0",
            ". .",
            "...",
        ];
        for name in hiding {
            let err = Attachment::parse(name, "application/octet-stream", "", None).unwrap_err();
            assert_eq!(err, AttachmentError::Filename, "{name:?}");
            assert_eq!(err.field(), "filename");
        }
    }

    /// The name as a careless program downstream might see it: characters of categories
    /// Cc, Cf, Zl and Zp dropped, an NTFS stream cut off, trailing dots and spaces dropped.
    /// Written from the Unicode categories, not from the checks under test.
    fn as_windows_might_see_it(name: &str) -> String {
        use unicode_general_category::{GeneralCategory as G, get_general_category};
        let kept: String = name
            .chars()
            .filter(|&c| {
                !matches!(get_general_category(c), G::Control | G::Format | G::LineSeparator | G::ParagraphSeparator)
            })
            .collect();
        let before_stream = kept.split(':').next().unwrap_or_default();
        before_stream.trim_end_matches(['.', ' ']).to_owned()
    }

    fn blocked_extension_of(name: &str) -> Option<String> {
        let (_, ext) = name.rsplit_once('.')?;
        EXECUTABLE_EXTENSIONS.iter().any(|e| e.eq_ignore_ascii_case(ext)).then(|| ext.to_owned())
    }

    fn hazard() -> impl Strategy<Value = String> {
        prop_oneof![
            Just(String::new()),
            prop::sample::select(vec![
                "\u{200B}", "\u{200C}", "\u{200D}", "\u{200E}", "\u{200F}", "\u{AD}", "\u{2060}", "\u{2061}",
                "\u{2062}", "\u{2063}", "\u{2064}", "\u{FEFF}", "\u{202A}", "\u{202B}", "\u{202C}", "\u{202D}",
                "\u{202E}", "\u{2066}", "\u{2067}", "\u{2068}", "\u{2069}", "\u{85}", "\u{2028}", "\u{2029}", "\0",
                "\x0b", "\t",
            ])
            .prop_map(str::to_owned),
        ]
    }

    use proptest::prelude::*;

    proptest! {
        /// A name whose extension, once invisible and control characters, a stream suffix and
        /// trailing dots and spaces are gone, is a blocked one never passes.
        #[test]
        fn no_name_showing_a_blocked_extension_passes(
            stem in "[A-Za-z0-9 ._-]{0,20}",
            ext in prop::sample::select(EXECUTABLE_EXTENSIONS),
            upper in prop::collection::vec(any::<bool>(), 16),
            (h1, h2, h3) in (hazard(), hazard(), hazard()),
            at in 0usize..16,
            tail in "[. ]{0,4}",
            stream in prop_oneof![Just(""), Just("::$DATA"), Just(":x"), Just(":Zone.Identifier:$DATA")],
        ) {
            let ext: String = ext.chars().zip(upper).map(|(c, up)| if up { c.to_ascii_uppercase() } else { c }).collect();
            let split = at.min(ext.len());
            let name = format!("{stem}{h1}.{}{h2}{}{h3}{tail}{stream}", &ext[..split], &ext[split..]);
            prop_assert!(blocked_extension_of(&as_windows_might_see_it(&name)).is_some(), "generator: {name:?}");
            prop_assert!(Attachment::parse(&name, "application/octet-stream", "", None).is_err(), "{name:?} passed");
        }

        /// Whatever the name, an accepted one shows no blocked extension to such a program.
        #[test]
        fn accepted_names_show_no_blocked_extension(name in "(.|[\u{AD}\u{200B}-\u{206F}\u{FEFF}:]){0,12}(\\.[a-zA-Z]{1,4})?[\u{1}-\u{3000}.: ]{0,3}") {
            if Attachment::parse(&name, "application/octet-stream", "", None).is_ok() {
                prop_assert_eq!(blocked_extension_of(&as_windows_might_see_it(&name)), None, "{:?}", name);
            }
        }
    }

    /// An RFC 2047 decoder as lenient as Python's `email.header.decode_header`: every
    /// `=?charset?Q|B?text?=` anywhere in the text is replaced by its bytes (read as ASCII, the
    /// only charset content the generator below uses); written apart from the check under test.
    fn decoded_as_a_lenient_reader_would(name: &str) -> String {
        fn decode(encoding: &str, text: &str) -> String {
            let bytes = if encoding.eq_ignore_ascii_case("q") {
                let mut bytes = Vec::new();
                let mut i = 0;
                while i < text.len() {
                    let hex = text.get(i + 1..i + 3).and_then(|h| u8::from_str_radix(h, 16).ok());
                    match (text.as_bytes()[i], hex) {
                        (b'_', _) => bytes.push(b' '),
                        (b'=', Some(byte)) => {
                            bytes.push(byte);
                            i += 2;
                        }
                        (b, _) => bytes.push(b),
                    }
                    i += 1;
                }
                bytes
            } else {
                base64::engine::general_purpose::STANDARD.decode(text).unwrap_or_else(|_| text.as_bytes().to_vec())
            };
            String::from_utf8_lossy(&bytes).into_owned()
        }
        let mut out = String::new();
        let mut rest = name;
        while let Some(start) = rest.find("=?") {
            let word = &rest[start + 2..];
            let parts: Vec<&str> = word.splitn(3, '?').collect();
            let found = match parts[..] {
                [_, encoding @ ("q" | "Q" | "b" | "B"), tail] => {
                    tail.find("?=").map(|end| (encoding, &tail[..end], &tail[end + 2..]))
                }
                _ => None,
            };
            match found {
                Some((encoding, text, after)) => {
                    out.push_str(&rest[..start]);
                    out.push_str(&decode(encoding, text));
                    rest = after;
                }
                None => {
                    out.push_str(&rest[..start + 2]);
                    rest = word;
                }
            }
        }
        out.push_str(rest);
        out
    }

    fn encoded_word(charset: &str, q: bool, upper: bool, text: &str) -> String {
        let (letter, body) = if q {
            let body: String = text
                .bytes()
                .map(|b| if b.is_ascii_alphanumeric() { (b as char).to_string() } else { format!("={b:02X}") })
                .collect();
            ("q", body)
        } else {
            ("b", b64(text.as_bytes()))
        };
        let letter = if upper { letter.to_ascii_uppercase() } else { letter.to_owned() };
        format!("=?{charset}?{letter}?{body}?=")
    }

    proptest! {
        /// No name holding an RFC 2047 encoded-word that decodes to a blocked extension is
        /// accepted: the whole name encoded, only its extension, or the name cut across two
        /// words, in Q or B, any charset label, with plain text around the words.
        #[test]
        fn no_encoded_name_decoding_to_a_blocked_extension_passes(
            stem in "[A-Za-z0-9_-]{1,12}",
            ext in prop::sample::select(EXECUTABLE_EXTENSIONS),
            charset in prop::sample::select(vec!["utf-8", "UTF-8", "iso-8859-1", "us-ascii", "", "utf-8*en", "x-unknown"]),
            q in any::<bool>(),
            upper in any::<bool>(),
            shape in 0u8..4,
            cut in 0usize..20,
            before in "[A-Za-z0-9 ]{0,4}",
            after in "[. ]{0,2}",
        ) {
            let name = format!("{stem}.{ext}");
            let encoded = match shape {
                0 => encoded_word(charset, q, upper, &name),
                1 => format!("{stem}{}", encoded_word(charset, q, upper, &format!(".{ext}"))),
                2 => {
                    let at = cut.min(name.len() - 1) + 1;
                    format!("{}{}", encoded_word(charset, q, upper, &name[..at]), encoded_word(charset, !q, upper, &name[at..]))
                }
                _ => format!("{stem}.{}", encoded_word(charset, q, upper, ext)),
            };
            let encoded = format!("{before}{encoded}{after}");
            let shown = decoded_as_a_lenient_reader_would(&encoded);
            prop_assert!(blocked_extension_of(shown.trim_end_matches(['.', ' '])).is_some(), "generator: {encoded:?} -> {shown:?}");
            let err = Attachment::parse(&encoded, "application/octet-stream", "", None).unwrap_err();
            prop_assert_eq!(err.field(), "filename");
        }

        /// An accepted name reads the same to a lenient RFC 2047 reader as it was judged.
        #[test]
        fn accepted_names_read_the_same_to_an_encoded_word_reader(name in "([a-z=?_.]|=\\?[a-z-]{0,5}\\?[qbQBx]\\?[A-Za-z0-9=]{0,6}\\?=){0,6}") {
            if Attachment::parse(&name, "application/octet-stream", "", None).is_ok() {
                prop_assert_eq!(decoded_as_a_lenient_reader_would(&name), name);
            }
        }
    }

    #[test]
    fn encoded_words_are_refused_and_names_merely_holding_the_characters_are_not() {
        for name in [
            "=?utf-8?q?invoice=2Eexe?=",
            "=?UTF-8?B?aW52b2ljZS5leGU=?=",
            "invoice=?utf-8?q?=2Eexe?=",
            "=?utf-8?q?report=2Epdf?=",
            "a =?x?Q??= b.txt",
        ] {
            let err = Attachment::parse(name, "application/octet-stream", "", None).unwrap_err();
            assert_eq!(err, AttachmentError::EncodedWord, "{name:?}");
            assert_eq!(err.field(), "filename");
        }
        for name in ["a=b.pdf", "what?.pdf", "=?.txt", "x=?utf-8?z?y?=.txt", "=?utf-8?q?unterminated.pdf", "?=a=?.txt"]
        {
            assert!(Attachment::parse(name, "application/octet-stream", "", None).is_ok(), "{name:?}");
        }
    }

    #[test]
    fn bad_filenames_types_contents_and_ids_name_their_field() {
        let cases: [(&str, &str, &str, Option<&str>, &str); 18] = [
            ("", "text/plain", "", None, "filename"),
            ("   ", "text/plain", "", None, "filename"),
            ("../etc/passwd", "text/plain", "", None, "filename"),
            ("a\\b.txt", "text/plain", "", None, "filename"),
            ("a\r\nb.txt", "text/plain", "", None, "filename"),
            ("..", "text/plain", "", None, "filename"),
            (&"a".repeat(256), "text/plain", "", None, "filename"),
            ("a.txt", "text", "", None, "contentType"),
            ("a.txt", "text/plain; name=a.txt", "", None, "contentType"),
            ("a.txt", "text/plain; charset=", "", None, "contentType"),
            ("a.txt", "text/plain; charset=utf-8; format=flowed", "", None, "contentType"),
            ("a.txt", "text/plain; charset=\"utf 8\"", "", None, "contentType"),
            ("a.txt", "text/plain; charset", "", None, "contentType"),
            ("a.txt", "text/plain; charset=utf-8", &b64(b"caf\xe9"), None, "content"),
            ("a.txt", "text/plain; charset=us-ascii", &b64("café".as_bytes()), None, "content"),
            ("a.txt", "text/plain", "not base64!", None, "content"),
            ("a.txt", "text/plain", "aGVsbG8\n", None, "content"),
            ("a.png", "image/png", "", Some("<logo>"), "contentId"),
        ];
        for (name, ctype, content, cid, field) in cases {
            let err = Attachment::parse(name, ctype, content, cid).unwrap_err();
            assert_eq!(err.field(), field, "{name:?} {ctype:?} {content:?} {cid:?}");
        }
    }
}
