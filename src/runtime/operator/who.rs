//! Who an operator is when no name is given: `COUNTERSIGN_BY`, else `USER`, else the name of
//! the account the process runs as (containers and CI often set no `USER`). A decision
//! records this name (`decided_by`).

/// `COUNTERSIGN_BY`, else `USER`, else the OS account's name; `None` when none is known (no
/// variable set and no passwd entry for the process's user), or when a variable holds what
/// cannot be a name ([`default_operator_checked`] says which).
pub fn default_operator() -> Option<String> {
    default_operator_checked().ok().flatten()
}

/// As [`default_operator`], but a variable that is set and not empty yet cannot be a name
/// (bytes that are not UTF-8, only white space) is an error naming it and its bytes escaped,
/// rather than a silent step to the next source, which would record another person.
pub fn default_operator_checked() -> Result<Option<String>, String> {
    for var in ["COUNTERSIGN_BY", "USER"] {
        let Some(v) = std::env::var_os(var).filter(|v| !v.is_empty()) else {
            continue;
        };
        return match v.into_string() {
            Ok(v) if !v.trim().is_empty() => Ok(Some(v)),
            Ok(_) => Err(format!("{var} is set to white space only")),
            Err(v) => Err(format!(
                "{var} is set to {}, which is not UTF-8",
                crate::safetext::plain_line(v.as_encoded_bytes(), 80)
            )),
        };
    }
    Ok(account_name())
}

/// The passwd name of the process's effective user (`getpwuid_r`), if it has one that is
/// UTF-8 and not blank.
pub fn account_name() -> Option<String> {
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    let mut buf = vec![0u8; 4096];
    loop {
        // SAFETY: passwd is plain data that getpwuid_r fills; the strings it points at live
        // in `buf`, which outlives their use below.
        let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
        let mut out: *mut libc::passwd = std::ptr::null_mut();
        let rc =
            unsafe { libc::getpwuid_r(uid, &mut pw, buf.as_mut_ptr().cast(), buf.len(), &mut out) };
        if rc == libc::ERANGE && buf.len() < 1 << 20 {
            buf.resize(buf.len() * 2, 0);
            continue;
        }
        if rc != 0 || out.is_null() || pw.pw_name.is_null() {
            return None;
        }
        // SAFETY: a non-NULL pw_name is a NUL-terminated string inside `buf`.
        let name = unsafe { std::ffi::CStr::from_ptr(pw.pw_name) };
        return name
            .to_str()
            .ok()
            .filter(|n| !n.trim().is_empty())
            .map(str::to_string);
    }
}

/// The longest operator name recorded, in bytes.
pub const NAME_MAX: usize = 256;

/// Why `name` cannot be recorded as who decided or cancelled (`decided_by`, the events' `by`),
/// or `None` when it can. A name is kept in the audit trail for good: one that is blank,
/// longer than [`NAME_MAX`] bytes, or holds a character every screen shows escaped (a
/// control, DEL, a C1 control, a bidi control, a format or default-ignorable character, a
/// line or paragraph separator) is a mistake or a forgery, never a person's name. A
/// backslash (`DOMAIN\user`) and any other printable character are kept.
pub fn name_refused(name: &str) -> Option<String> {
    if name.trim().is_empty() {
        return Some("it is empty".into());
    }
    if name.trim() != name {
        // `alice ` beside `alice` would read as one reviewer in every list.
        return Some("it starts or ends with a blank; a name is recorded as typed".into());
    }
    if name.len() > NAME_MAX {
        return Some(format!(
            "it is {} bytes long; a name is at most {NAME_MAX}",
            name.len()
        ));
    }
    // What every screen would show escaped (a backslash only doubled) is not a name's.
    if crate::safetext::shows_as_is(name) {
        return None;
    }
    let odd = name
        .chars()
        .find(|c| !crate::safetext::shows_as_is(c.encode_utf8(&mut [0; 4])));
    Some(match odd {
        Some(c) => format!(
            "it holds U+{:04X}, which every screen shows escaped: a name holds no control, \
             bidi, invisible, blank-looking, private-use or unassigned character",
            c as u32
        ),
        None => format!(
            "it is shown escaped ({}): a name is text every screen shows as it is",
            crate::safetext::plain_line(name.as_bytes(), 80)
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::name_refused;

    #[test]
    fn the_account_name_is_the_passwd_name_of_the_effective_user() {
        // The test process's own account (root in CI containers) has a passwd entry.
        let name = super::account_name().expect("a passwd entry");
        let out = std::process::Command::new("id")
            .arg("-un")
            .output()
            .unwrap();
        assert_eq!(name, String::from_utf8_lossy(&out.stdout).trim());
    }

    #[test]
    fn a_name_is_printable_text_of_at_most_256_bytes() {
        for ok in [
            "alice",
            "DOMAIN\\bob",
            "Zoë O'Brien",
            "李雷",
            &"x".repeat(256),
        ] {
            assert_eq!(name_refused(ok), None, "{ok}");
        }
        for bad in [
            "",
            "  ",
            "ev\u{1b}[31mil",
            "al\u{202e}ice",
            "bob\u{200b}",
            "eve\u{7f}",
            "a\nb",
            "c\u{85}",
            "d\u{2028}",
            "\u{2800}",
            "alice\u{a0}",
            " alice",
            "alice ",
            "\talice",
            "\u{e000}",
            "a\u{378}",
            "a\u{fffe}",
            &"x".repeat(257),
        ] {
            assert!(name_refused(bad).is_some(), "{bad:?}");
        }
    }
}
