//! Characters that user text headed for a message header or a recipient's file system may not
//! hold, shared by every check that refuses them (subjects, display names, addresses, custom
//! header values, attachment filenames).
//!
//! Two sets:
//! - [`is_line_or_control`]: a control character (Unicode category Cc: C0, DEL and C1, U+0085
//!   NEL among them) or a line or paragraph separator (U+2028, U+2029). Mail software and
//!   terminals treat some of these as line ends, the rest are never meaningful in a header.
//! - [`is_invisible`]: a format character (category Cf: zero-width space and joiners, soft
//!   hyphen, bidi embeddings, overrides and isolates, word joiner, BOM, ...) or another
//!   default-ignorable code point that renders as nothing (Hangul fillers, the combining
//!   grapheme joiner, variation selectors, tag characters). They let a name look like one
//!   thing and be another, or be stripped by a later program into something else:
//!   `x.ex\u{AD}e` shows as `x.exe`.

use unicode_general_category::{GeneralCategory, get_general_category};

/// A control character (Cc, which includes U+0085) or U+2028/U+2029.
pub fn is_line_or_control(c: char) -> bool {
    c.is_control() || matches!(c, '\u{2028}' | '\u{2029}')
}

/// A format character (Cf) or a default-ignorable code point outside Cf that renders as
/// nothing (Unicode's `Default_Ignorable_Code_Point`, the Cf ones aside).
pub fn is_invisible(c: char) -> bool {
    get_general_category(c) == GeneralCategory::Format
        || matches!(
            c,
            '\u{034F}'
                | '\u{115F}'..='\u{1160}'
                | '\u{17B4}'..='\u{17B5}'
                | '\u{180B}'..='\u{180F}'
                | '\u{2065}'
                | '\u{3164}'
                | '\u{FE00}'..='\u{FE0F}'
                | '\u{FFA0}'
                | '\u{FFF0}'..='\u{FFF8}'
                | '\u{E0000}'..='\u{E0FFF}'
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_and_separators_are_line_or_control_and_text_is_not() {
        for c in [
            '\0', '\t', '\n', '\r', '\x0b', '\x0c', '\x1b', '\x7f', '\u{80}', '\u{85}', '\u{9f}', '\u{2028}',
            '\u{2029}',
        ] {
            assert!(is_line_or_control(c), "{:?}", c);
        }
        for c in ['a', ' ', 'é', '€', '\u{200B}', '\u{A0}', '😀'] {
            assert!(!is_line_or_control(c), "{:?}", c);
        }
    }

    #[test]
    fn format_and_blank_ignorable_characters_are_invisible() {
        let invisible = [
            '\u{AD}',
            '\u{200B}',
            '\u{200C}',
            '\u{200D}',
            '\u{200E}',
            '\u{200F}',
            '\u{202A}',
            '\u{202E}',
            '\u{2060}',
            '\u{2064}',
            '\u{2066}',
            '\u{2069}',
            '\u{FEFF}',
            '\u{061C}',
            '\u{180E}',
            '\u{3164}',
            '\u{115F}',
            '\u{034F}',
            '\u{FE0F}',
            '\u{E0041}',
            '\u{FFF9}',
        ];
        for c in invisible {
            assert!(is_invisible(c), "U+{:04X}", c as u32);
        }
        for c in ['a', ' ', '.', 'ä', '\u{A0}', '-', '😀', '\t'] {
            assert!(!is_invisible(c), "U+{:04X}", c as u32);
        }
    }
}
