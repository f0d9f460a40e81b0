//! Fuzz target: `hearth_protocol::decode_frame` for `PairRequest` (input byte 0 even) or
//! `PairResponse` (odd) over mutated valid frames, checked against re-encoding and
//! against `hearth_sync::read_frame` with the `hearth/pair/1` limit.

#![no_main]

use std::sync::OnceLock;

use hearth_fuzz::{custom_mutate, Format};
use hearth_protocol::{
    decode_frame, encode_frame, PairRequest, PairResponse, FRAME_HEADER_LEN, PAIR_MAX_FRAME,
};
use libfuzzer_sys::{fuzz_mutator, fuzz_target, fuzzer_mutate};
use serde::{de::DeserializeOwned, Serialize};

fn rt() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime")
    })
}

fn check<T: DeserializeOwned + Serialize + PartialEq + std::fmt::Debug>(data: &[u8]) {
    let mut rest = data;
    let mut decoded = Vec::new();
    while let Ok(Some((msg, used))) = decode_frame::<T>(rest) {
        assert!(used > FRAME_HEADER_LEN && used <= rest.len());
        // Postcard accepts overlong varints, so compare messages, not bytes.
        let again = encode_frame(&msg).expect("re-encode");
        let back = decode_frame::<T>(&again).expect("re-decode");
        assert_eq!(back.map(|(m, _)| m).as_ref(), Some(&msg));
        decoded.push((msg, used));
        rest = &rest[used..];
    }
    let mut reader = data;
    let mut buf = Vec::new();
    let mut read = Vec::new();
    rt().block_on(async {
        while let Ok(Some(m)) =
            hearth_sync::read_frame::<T, _>(&mut reader, &mut buf, PAIR_MAX_FRAME).await
        {
            read.push(m);
        }
    });
    // The pairing reader stops at the first frame over its limit; up to there they agree.
    assert!(read.len() <= decoded.len());
    for (r, (d, used)) in read.iter().zip(&decoded) {
        assert_eq!(r, d);
        assert!(*used - FRAME_HEADER_LEN <= PAIR_MAX_FRAME);
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&which, frames)) = data.split_first() else {
        return;
    };
    if which & 1 == 0 {
        check::<PairRequest>(frames);
    } else {
        check::<PairResponse>(frames);
    }
});

fuzz_mutator!(|data: &mut [u8], size: usize, max_size: usize, seed: u32| {
    let mut bytes = |v: &mut Vec<u8>| {
        let len = v.len();
        let cap = len + 64 + len / 2;
        v.resize(cap, 0);
        let n = fuzzer_mutate(v, len, cap);
        v.truncate(n);
    };
    custom_mutate(data, size, max_size, seed, Format::PairFrame, &mut bytes)
});
