//! Fuzz target: `hearth_protocol::decode_frame::<SyncMessage>` over runs of mutated valid
//! frames, checked against `hearth_sync::read_frame` (the session's reader, with the
//! `hearth/sync/1` limit) and against re-encoding (decode ∘ encode = id).

#![no_main]

use std::sync::OnceLock;

use hearth_fuzz::{custom_mutate, Format};
use hearth_protocol::{decode_frame, encode_frame, SyncMessage, FRAME_HEADER_LEN, MAX_FRAME};
use libfuzzer_sys::{fuzz_mutator, fuzz_target, fuzzer_mutate};

fn rt() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime")
    })
}

fuzz_target!(|data: &[u8]| {
    let mut rest = data;
    let mut decoded = Vec::new();
    while let Ok(Some((msg, used))) = decode_frame::<SyncMessage>(rest) {
        assert!(used > FRAME_HEADER_LEN && used <= rest.len());
        // What decodes re-encodes to a frame that decodes to the same message. (Not
        // byte-equal: postcard accepts overlong varints, e.g. `80 00` for 0.)
        let again = encode_frame(&msg).expect("re-encode");
        let back = decode_frame::<SyncMessage>(&again).expect("re-decode");
        assert_eq!(back.map(|(m, _)| m).as_ref(), Some(&msg));
        rest = &rest[used..];
        decoded.push(msg);
    }
    let mut reader = data;
    let mut buf = Vec::new();
    let mut read = Vec::new();
    rt().block_on(async {
        while let Ok(Some(m)) =
            hearth_sync::read_frame::<SyncMessage, _>(&mut reader, &mut buf, MAX_FRAME).await
        {
            read.push(m);
        }
    });
    assert_eq!(decoded, read, "read_frame and decode_frame disagree");
});

fuzz_mutator!(|data: &mut [u8], size: usize, max_size: usize, seed: u32| {
    let mut bytes = |v: &mut Vec<u8>| {
        let len = v.len();
        let cap = len + 64 + len / 2;
        v.resize(cap, 0);
        let n = fuzzer_mutate(v, len, cap);
        v.truncate(n);
    };
    custom_mutate(data, size, max_size, seed, Format::SyncFrames, &mut bytes)
});
