//! `attachments`: files sent with a message, as ordinary attachments or, with a
//! `contentId`, as inline parts the HTML refers to with `cid:<contentId>`.
//!
//! Rules (each refusal names the field at fault):
//! - `filename`: 1–255 characters, no `/` or `\`, no control character, not `.` or `..`;
//!   an executable extension ([`EXECUTABLE_EXTENSIONS`], checked after trailing dots and
//!   spaces, which Windows drops) is refused.
//! - `contentType`: `type/subtype` of RFC 7230 token characters, without parameters; the
//!   executable types in [`EXECUTABLE_TYPES`] are refused.
//! - `content`: standard base64 with padding, no whitespace. The stored form is the text as
//!   sent, so nothing is re-encoded per read; the MIME builder decodes it.
//! - `contentId`: 1–250 characters of RFC 5322 `atext`, `.` and `@`, without angle brackets
//!   (Tidings writes `Content-ID: <id>`).

use base64::Engine as _;
use serde::{Deserialize, Serialize};

/// Most attachments on one message.
pub const MAX_ATTACHMENTS: usize = 100;
/// Most base64 characters of all attachments of one message together (40 MiB).
pub const MAX_ATTACHMENTS_ENCODED_BYTES: usize = 40 * 1024 * 1024;
/// Longest filename, in characters.
pub const MAX_FILENAME_CHARS: usize = 255;
/// Longest content id.
pub const MAX_CONTENT_ID: usize = 250;

/// Extensions that run code when opened on a common desktop (Postmark's and Gmail's lists,
/// roughly); compared without case.
pub const EXECUTABLE_EXTENSIONS: &[&str] = &[
    "exe",
    "bat",
    "cmd",
    "com",
    "scr",
    "pif",
    "vbs",
    "vbe",
    "vba",
    "js",
    "jse",
    "wsf",
    "wsh",
    "wsc",
    "msi",
    "msp",
    "mst",
    "cpl",
    "jar",
    "ps1",
    "psm1",
    "hta",
    "lnk",
    "reg",
    "dll",
    "msc",
    "chm",
    "hlp",
    "inf",
    "ins",
    "isp",
    "sct",
    "shs",
    "scf",
    "gadget",
    "application",
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
    /// Empty, too long, a path, or a control character.
    #[error(
        "must be 1 to {MAX_FILENAME_CHARS} characters without '/', '\\' or control characters, and not '.' or '..'"
    )]
    Filename,
    /// An executable extension.
    #[error("executable files (.{0}) cannot be attached")]
    ExecutableFilename(String),
    /// Not `type/subtype`.
    #[error("must be a MIME type such as application/pdf (type/subtype, no parameters)")]
    ContentType,
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
            Self::Filename | Self::ExecutableFilename(_) => "filename",
            Self::ContentType | Self::ExecutableType(_) => "contentType",
            Self::Base64(_) => "content",
            Self::ContentId => "contentId",
        }
    }
}

/// One attachment, checked; built by [`Attachment::parse`].
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Attachment {
    filename: String,
    content_type: String,
    /// Standard base64, as sent.
    content: String,
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
        content: &str,
        content_id: Option<&str>,
    ) -> Result<Self, AttachmentError> {
        check_filename(filename)?;
        check_content_type(content_type)?;
        if let Some(id) = content_id {
            check_content_id(id)?;
        }
        let size = decode(content).map_err(AttachmentError::Base64)?.len() as u64;
        Ok(Self {
            filename: filename.to_owned(),
            content_type: content_type.to_owned(),
            content: content.to_owned(),
            content_id: content_id.map(str::to_owned),
            size,
        })
    }

    /// The filename.
    pub fn filename(&self) -> &str {
        &self.filename
    }

    /// `type/subtype`.
    pub fn content_type(&self) -> &str {
        &self.content_type
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
        self.content.len()
    }

    /// The file's bytes.
    pub fn bytes(&self) -> Result<Vec<u8>, String> {
        decode(&self.content)
    }
}

fn decode(content: &str) -> Result<Vec<u8>, String> {
    base64::engine::general_purpose::STANDARD.decode(content).map_err(|e| e.to_string())
}

fn check_filename(name: &str) -> Result<(), AttachmentError> {
    let ok = !name.trim().is_empty()
        && name.chars().count() <= MAX_FILENAME_CHARS
        && !name.chars().any(|c| c == '/' || c == '\\' || c.is_control())
        && name != "."
        && name != "..";
    if !ok {
        return Err(AttachmentError::Filename);
    }
    // Windows drops trailing dots and spaces, so `x.exe. ` opens as `x.exe`.
    let trimmed = name.trim_end_matches(['.', ' ']);
    if let Some((_, ext)) = trimmed.rsplit_once('.')
        && EXECUTABLE_EXTENSIONS.iter().any(|e| e.eq_ignore_ascii_case(ext))
    {
        return Err(AttachmentError::ExecutableFilename(ext.to_ascii_lowercase()));
    }
    Ok(())
}

fn is_token(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

fn check_content_type(text: &str) -> Result<(), AttachmentError> {
    let Some((kind, subtype)) = text.split_once('/') else { return Err(AttachmentError::ContentType) };
    if text.len() > 255 || !is_token(kind) || !is_token(subtype) {
        return Err(AttachmentError::ContentType);
    }
    if EXECUTABLE_TYPES.iter().any(|t| t.eq_ignore_ascii_case(text)) {
        return Err(AttachmentError::ExecutableType(text.to_ascii_lowercase()));
    }
    Ok(())
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

    #[test]
    fn a_good_attachment_keeps_its_parts_and_decodes() {
        let a = Attachment::parse("Invoice März.pdf", "application/pdf", &b64(b"%PDF-1.7 \x00\xff"), None).unwrap();
        assert_eq!(
            (a.filename(), a.content_type(), a.content_id(), a.size()),
            ("Invoice März.pdf", "application/pdf", None, 11)
        );
        assert_eq!(a.bytes().unwrap(), b"%PDF-1.7 \x00\xff");
        let inline = Attachment::parse("logo.png", "image/png", &b64(b"png"), Some("logo@acme")).unwrap();
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
    }

    #[test]
    fn bad_filenames_types_contents_and_ids_name_their_field() {
        let cases: [(&str, &str, &str, Option<&str>, &str); 12] = [
            ("", "text/plain", "", None, "filename"),
            ("   ", "text/plain", "", None, "filename"),
            ("../etc/passwd", "text/plain", "", None, "filename"),
            ("a\\b.txt", "text/plain", "", None, "filename"),
            ("a\r\nb.txt", "text/plain", "", None, "filename"),
            ("..", "text/plain", "", None, "filename"),
            (&"a".repeat(256), "text/plain", "", None, "filename"),
            ("a.txt", "text", "", None, "contentType"),
            ("a.txt", "text/plain; charset=utf-8", "", None, "contentType"),
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
