"""Generate the shipped demo corpus, `hag/data/demo_corpus.json` (SPEC §9).

Pure standard library and deterministic: the same script always writes the same bytes.
Run it from anywhere:

    python hag/data/make_demo_corpus.py

The corpus has the seed's shape: a Cryptography topic of 29 public entries and 97 edges
(every edge type, all three provenance classes), drift residue that starts as orphans for
enrichment to wire in, one `_unanchored_` entry, tutor / student / visual entries, and two
more topics (Linux Basics, Data Structures). The dates are chosen against a demo "now" of
2026-11-30 (pass `hag nightly --as-of 2026-11-30T00:00:00Z`):

- cull (learned/enriched, confidence < 0.35, never traversed, >= 90 days old): exactly the
  four crypto edges listed in CULLABLE below; one more old edge sits exactly at 0.35 and
  five low edges are too young, so both sides of each rule are visible;
- promotion (candidate, >= 14 days old, confidence >= 0.50, failure_count 0): the entries
  listed in PROMOTABLE below; other candidates miss by age, confidence or failures.

The script asserts these properties before it writes anything.
"""

from __future__ import annotations

import json
import re
import uuid
from collections import Counter, defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from hag.settings import defaults

DIALS = defaults()  # the rules the corpus is built to exercise, as the registry states them

OUT = Path(__file__).with_name("demo_corpus.json")
DEMO_NOW = datetime(2026, 11, 30, tzinfo=UTC)
UNANCHORED = "_unanchored_"
SLUG_RE = re.compile(r"^[a-z0-9][a-z0-9-]*$")

# Ladder qualities recorded on the rows (SPEC §4 concept ladder; the settings' defaults).
Q_CATALOGUE = DIALS.ladder_quality_exact
Q_MINTED = DIALS.ladder_quality_minted
Q_UNANCHORED = DIALS.ladder_quality_unanchored

TOPICS = [
    ("cryptography", "Cryptography"),
    ("data-structures", "Data Structures"),
    ("linux-basics", "Linux Basics"),
]

# ---------------------------------------------------------------------------------------
# Concepts: (slug, title, description, aliases). Drift residue is marked origin "minted".
# ---------------------------------------------------------------------------------------
CRYPTO_CONCEPTS = [
    (
        "caesar-cipher",
        "Caesar cipher",
        "A substitution cipher that shifts every letter a fixed number of places along the alphabet. Its key space of 25 shifts makes it the standard first example of brute force.",
        ["shift-cipher", "rot13"],
    ),
    (
        "substitution-cipher",
        "Substitution cipher",
        "A cipher that replaces each letter with another according to a secret scrambled alphabet. It has an enormous key space yet falls to frequency analysis.",
        ["monoalphabetic-cipher"],
    ),
    (
        "frequency-analysis",
        "Frequency analysis",
        "Breaking a substitution cipher by matching the most common ciphertext symbols to the most common letters of the language.",
        ["letter-frequency-attack"],
    ),
    (
        "xor",
        "XOR",
        "The bitwise exclusive-or operation; applying the same key twice returns the original value, which makes it the basic combining step of many ciphers.",
        ["exclusive-or"],
    ),
    (
        "one-time-pad",
        "One-time pad",
        "Encryption by combining the message with a truly random key as long as the message, used only once; provably secure when those rules hold.",
        ["otp", "vernam-cipher"],
    ),
    (
        "symmetric-encryption",
        "Symmetric encryption",
        "Encryption where the same secret key encrypts and decrypts, so both parties must already share it.",
        ["secret-key-encryption", "shared-key-cryptography"],
    ),
    (
        "block-ciphers",
        "Block ciphers",
        "Keyed permutations that encrypt fixed-size blocks of data, such as 128-bit blocks for AES.",
        ["block-cipher"],
    ),
    (
        "aes",
        "AES",
        "The Advanced Encryption Standard: a 128-bit block cipher built from rounds of byte substitution, row shifting, column mixing and round-key addition.",
        ["advanced-encryption-standard", "rijndael"],
    ),
    (
        "modes-of-operation",
        "Modes of operation",
        "Rules for using a block cipher on messages longer than one block, such as ECB, CBC, CTR and GCM, and the IV or nonce each requires.",
        ["ecb", "cbc", "ctr-mode", "gcm"],
    ),
    (
        "stream-ciphers",
        "Stream ciphers",
        "Ciphers that expand a short key and a nonce into a long keystream and combine it with the message bit by bit.",
        ["stream-cipher", "chacha20"],
    ),
    (
        "modular-arithmetic",
        "Modular arithmetic",
        "Arithmetic that wraps around after reaching a modulus, like hours on a clock; the setting for RSA, Diffie-Hellman and elliptic curves.",
        ["clock-arithmetic", "mod"],
    ),
    (
        "prime-numbers",
        "Prime numbers",
        "Numbers divisible only by one and themselves; multiplying large primes is easy while factoring their product is hard.",
        ["primes"],
    ),
    (
        "public-key-cryptography",
        "Public-key cryptography",
        "Cryptography with a key pair: a public key anyone may use and a private key only its owner holds.",
        ["asymmetric-cryptography", "asymmetric-encryption"],
    ),
    (
        "diffie-hellman",
        "Diffie-Hellman key exchange",
        "A protocol that lets two parties agree on a shared secret over a public channel, resting on the hardness of the discrete logarithm.",
        ["dh", "key-exchange"],
    ),
    (
        "hash-functions",
        "Hash functions",
        "Functions that map any input to a fixed-size digest, one-way and collision resistant, such as SHA-256.",
        ["hashing", "sha-256", "message-digest"],
    ),
    (
        "message-authentication-codes",
        "Message authentication codes",
        "A keyed checksum that proves a message was not altered by anyone without the key; HMAC is the standard construction.",
        ["mac", "hmac"],
    ),
    (
        "digital-signatures",
        "Digital signatures",
        "A value only the private-key holder can produce and anyone with the public key can verify, giving integrity, authenticity and non-repudiation.",
        ["signatures", "ecdsa", "ed25519"],
    ),
    (
        "certificates-and-pki",
        "Certificates and PKI",
        "Signed statements binding a public key to an identity, chained up to root authorities that clients already trust.",
        ["x509", "pki", "certificate-authority"],
    ),
    (
        "tls-handshake",
        "TLS handshake",
        "The opening exchange of a TLS connection that agrees on keys, authenticates the server with its certificate and confirms nothing was tampered with.",
        ["tls", "ssl-handshake", "https-handshake"],
    ),
    (
        "key-management",
        "Key management",
        "Generating, storing, distributing, rotating and revoking keys; where most real systems fail rather than in the cipher.",
        ["key-rotation", "secrets-management"],
    ),
    (
        "password-hashing",
        "Password hashing",
        "Storing passwords as salted outputs of a deliberately slow function such as bcrypt, scrypt or Argon2, so leaked tables are expensive to crack.",
        ["bcrypt", "argon2", "key-stretching"],
    ),
    (
        "elliptic-curves",
        "Elliptic curves",
        "Groups of points on a curve over a finite field where repeated point addition is easy to compute and hard to undo; the basis of ECDH and ECDSA.",
        ["ecc", "elliptic-curve-cryptography"],
    ),
    (
        "entropy-and-randomness",
        "Entropy and randomness",
        "Unpredictability measured in bits; keys, nonces and salts must come from a cryptographically secure random source.",
        ["csprng", "randomness"],
    ),
]

# Drift residue: minted at ladder step 3 by live sessions, then given descriptions so that
# enrichment has something to read. They start with no edges at all.
CRYPTO_RESIDUE_CONCEPTS = [
    (
        "buffer-overflow",
        "Buffer overflow",
        "A memory-safety bug where a program writes or reads past the end of a buffer; Heartbleed was an over-read that leaked TLS private keys from correct cryptographic code.",
        ["heartbleed", "buffer-over-read"],
    ),
    (
        "rsa",
        "RSA",
        "Public-key encryption and signatures built on modular exponentiation with a modulus that is the product of two large primes; its security rests on the difficulty of factoring.",
        ["rivest-shamir-adleman"],
    ),
    (
        "steganography",
        "Steganography",
        "Hiding the existence of a message inside another medium, such as the low bits of image pixels, as opposed to encryption, which hides its meaning.",
        ["hidden-messages"],
    ),
    (
        "hashing-for-integrity",
        "Hashing for integrity",
        "Publishing a file's cryptographic hash so that a downloader can check the file was not corrupted or altered; it needs a trusted channel for the hash itself.",
        ["checksums", "file-integrity"],
    ),
    (
        "cryptography",
        "Cryptography",
        "The study of techniques that protect information against adversaries: confidentiality, integrity and authenticity.",
        ["crypto"],
    ),
]
RESIDUE = [c[0] for c in CRYPTO_RESIDUE_CONCEPTS]

LINUX_CONCEPTS = [
    (
        "filesystem-hierarchy",
        "Filesystem hierarchy",
        "The single directory tree rooted at / with conventional places such as /home, /etc, /var and /usr.",
        ["fhs", "directory-tree"],
    ),
    (
        "absolute-and-relative-paths",
        "Absolute and relative paths",
        "Naming a file from the root (/etc/hosts) or from the current working directory (../notes.txt), including the . and .. entries.",
        ["paths", "working-directory"],
    ),
    (
        "navigation-commands",
        "Navigation commands",
        "pwd, ls and cd: finding out where you are, what is there and moving around the tree.",
        ["cd", "ls", "pwd"],
    ),
    (
        "file-permissions",
        "File permissions",
        "Read, write and execute bits for owner, group and others, shown by ls -l and changed with chmod and chown.",
        ["chmod", "rwx", "permission-denied"],
    ),
    (
        "users-and-groups",
        "Users and groups",
        "Accounts and groups that permission checks are made against, including the root user and sudo.",
        ["root", "sudo", "uid"],
    ),
    (
        "pipes-and-redirection",
        "Pipes and redirection",
        "Connecting one program's output to another's input with | and sending streams to files with >, >> and 2>.",
        ["pipes", "redirection", "stdin-stdout"],
    ),
    (
        "processes-and-signals",
        "Processes and signals",
        "Running programs with their process ids, inspected with ps and top and stopped or interrupted with signals such as SIGTERM, SIGKILL and SIGINT.",
        ["ps", "kill", "signals"],
    ),
    (
        "environment-variables",
        "Environment variables",
        "Named values such as PATH and HOME that a process inherits from its parent; set with export.",
        ["env-vars", "path-variable"],
    ),
    (
        "shell-scripting",
        "Shell scripting",
        "Saving commands in an executable file with a shebang line, variables, conditionals and loops.",
        ["bash-scripts", "shebang"],
    ),
    (
        "package-management",
        "Package management",
        "Installing, updating and removing software through a package manager such as apt or dnf, which tracks the files each package owns.",
        ["apt", "dnf", "packages"],
    ),
]

DS_CONCEPTS = [
    (
        "arrays",
        "Arrays",
        "A contiguous block of equally sized slots addressed by index, giving constant-time access and costly insertion at the front.",
        ["array", "lists"],
    ),
    (
        "linked-lists",
        "Linked lists",
        "A chain of nodes in which each node holds a value and a pointer to the next, giving cheap insertion and linear-time access.",
        ["linked-list", "singly-linked-list"],
    ),
    (
        "stacks",
        "Stacks",
        "A last-in, first-out collection with push and pop, used for undo, call stacks and bracket matching.",
        ["stack", "lifo"],
    ),
    (
        "queues",
        "Queues",
        "A first-in, first-out collection with enqueue and dequeue, used for scheduling and breadth-first search.",
        ["queue", "fifo", "deque"],
    ),
    (
        "hash-tables",
        "Hash tables",
        "An array of buckets indexed by a hash of the key, giving average constant-time lookup with a strategy for collisions.",
        ["hash-map", "dictionary", "dict"],
    ),
    (
        "trees",
        "Trees",
        "A hierarchical structure of nodes with one root, where each node has children and no cycles.",
        ["tree"],
    ),
    (
        "binary-search-trees",
        "Binary search trees",
        "Binary trees where every left descendant is smaller and every right descendant is larger, allowing logarithmic search when balanced.",
        ["bst"],
    ),
    (
        "heaps",
        "Heaps",
        "Complete binary trees stored in arrays where each parent is ordered before its children; the usual priority queue.",
        ["heap", "priority-queue", "heapq"],
    ),
    (
        "graphs",
        "Graphs",
        "Vertices connected by edges, directed or undirected, stored as adjacency lists or matrices.",
        ["graph", "adjacency-list"],
    ),
    (
        "big-o-notation",
        "Big-O notation",
        "A way of describing how an algorithm's running time or memory grows with the input size, ignoring constant factors.",
        ["complexity", "time-complexity"],
    ),
]

# ---------------------------------------------------------------------------------------
# Public entries: (slug, maturity, confidence, created date, successes, failures, instruction)
# Visibility floors (SPEC §3): proven >= 0.30, pattern >= 0.40, candidate >= 0.70 (and the
# caller's global floor 0.40).
# ---------------------------------------------------------------------------------------
CRYPTO_ENTRIES = [
    (
        "caesar-cipher",
        "proven",
        0.91,
        "2026-01-05",
        41,
        2,
        "Start with two aligned paper alphabets and have the student encrypt their own name with shift 3 before naming anything. Then ask them to break a short ciphertext by trying all 25 shifts; the point to land is that a key space this small falls to brute force.",
    ),
    (
        "substitution-cipher",
        "pattern",
        0.66,
        "2026-01-05",
        9,
        2,
        "Contrast with Caesar by asking how many keys a scrambled alphabet has (26 factorial, about 4 x 10^26) and let the student conclude that brute force is hopeless. Do not confirm that it is therefore secure; leave that belief standing so frequency analysis can knock it down.",
    ),
    (
        "frequency-analysis",
        "proven",
        0.72,
        "2026-01-07",
        18,
        3,
        "Give a ciphertext of at least 300 letters and a bar chart of English letter frequencies, and let the student match the tallest bars to E, T and A themselves. Messages under 100 letters make the method look unreliable, so choose the text length deliberately.",
    ),
    (
        "xor",
        "proven",
        0.86,
        "2026-01-07",
        27,
        1,
        "Build the XOR truth table together, then have the student XOR a byte with a key byte and XOR the result with the same key again to recover the original. Make explicit that XOR is its own inverse, which is why one operation both encrypts and decrypts.",
    ),
    (
        "one-time-pad",
        "pattern",
        0.63,
        "2026-01-12",
        8,
        1,
        "Present the three rules (key truly random, as long as the message, never reused) and have the student break a two-time pad by XORing two ciphertexts that share a key. Stress that the perfect-secrecy proof holds only while all three rules hold.",
    ),
    (
        "symmetric-encryption",
        "proven",
        0.84,
        "2026-01-12",
        33,
        2,
        "Frame symmetric encryption as one shared key that both locks and unlocks, and ask the student who else must hold that key and how it got there. The key-distribution problem they discover motivates everything public-key, so let them state it in their own words.",
    ),
    (
        "block-ciphers",
        "pattern",
        0.58,
        "2026-01-19",
        6,
        2,
        "Describe a block cipher as a keyed permutation on fixed-size blocks (128 bits for AES) and have the student count how many blocks a 1 KB file becomes. Keep the internals closed for now; the question to raise is what to do with more than one block.",
    ),
    (
        "aes",
        "proven",
        0.77,
        "2026-01-19",
        22,
        4,
        "Walk one round of AES on a 4x4 grid of bytes, naming SubBytes, ShiftRows, MixColumns and AddRoundKey as four separate jobs. Students who try to memorise the algorithm stall; ask instead which step would be pointless if it were removed.",
    ),
    (
        "modes-of-operation",
        "pattern",
        0.52,
        "2026-01-26",
        5,
        2,
        "Show the ECB penguin first: the same image encrypted block by block still shows its outline, because identical plaintext blocks give identical ciphertext blocks. Ask the student to predict what an attacker learns from that before introducing anything else. Then introduce CBC as mixing the previous ciphertext block in before encrypting, and have them trace two identical blocks through it on paper. Finish with CTR as turning the block cipher into a keystream, which connects back to stream ciphers. Warn explicitly that an IV or nonce must never repeat under the same key.",
    ),
    (
        "stream-ciphers",
        "pattern",
        0.45,
        "2026-02-02",
        3,
        2,
        "Present a stream cipher as a one-time pad whose pad is generated from a short key, and ask what was given up compared with a true pad. Steer toward the answer that security now rests on the keystream being unpredictable and the nonce never being reused.",
    ),
    (
        "modular-arithmetic",
        "proven",
        0.88,
        "2026-01-05",
        36,
        3,
        "Use a clock face: 9 + 5 on a 12-hour clock is 2, and that is arithmetic mod 12. Have the student compute powers of 3 mod 7 by hand so the wrap-around pattern is visible before any cryptosystem relies on it.",
    ),
    (
        "prime-numbers",
        "pattern",
        0.38,
        "2026-02-02",
        2,
        3,
        "Keep primes practical: have the student factor 91 and then 8051 by hand and notice how fast the effort grows. State the takeaway plainly: multiplying primes is easy and undoing the multiplication is hard, the asymmetry public-key schemes borrow.",
    ),
    (
        "public-key-cryptography",
        "proven",
        0.79,
        "2026-02-09",
        19,
        3,
        "Use the padlock analogy: anyone can snap an open padlock shut, only the key holder can open it. Then ask which half of the pair the student would publish and which they would guard, and correct at once any answer that publishes the private key.",
    ),
    (
        "diffie-hellman",
        "proven",
        0.81,
        "2026-02-09",
        24,
        2,
        "Run the paint-mixing demonstration first (shared colour, secret colours, swap the mixtures), then redo it with numbers: p = 23, g = 5 and small secrets. Have the student compute both sides and watch the shared value match; only then say the eavesdropper faces the discrete logarithm problem.",
    ),
    (
        "hash-functions",
        "proven",
        0.82,
        "2026-02-16",
        21,
        1,
        "Let the student hash 'hello' and 'hellp' with SHA-256 and compare the digests, so the avalanche effect is seen rather than told. Test the one-way property by asking how they would get the input back; if they say decrypt, address the hashing-versus-encryption confusion directly.",
    ),
    (
        "message-authentication-codes",
        "pattern",
        0.61,
        "2026-02-16",
        7,
        1,
        "Pose the attack first: an attacker changes a message and recomputes its plain hash, so the check still passes. Ask what the attacker lacks, then introduce the MAC as a hash that needs a secret key to compute, naming HMAC as the standard construction.",
    ),
    (
        "digital-signatures",
        "pattern",
        0.57,
        "2026-02-23",
        6,
        2,
        "Contrast with a MAC: a MAC proves the message came from someone holding the shared key, a signature proves it came from the one holder of a private key, and anyone can check it. Avoid the phrase 'encrypting with the private key', which is wrong for most schemes and feeds a common misconception.",
    ),
    (
        "certificates-and-pki",
        "pattern",
        0.49,
        "2026-03-02",
        4,
        2,
        "Present a certificate as a signed statement that a public key belongs to a name, signed by someone the browser already trusts. Have the student open a real site's certificate in the browser and walk the chain from the site up to the root store.",
    ),
    (
        "tls-handshake",
        "proven",
        0.74,
        "2026-03-09",
        15,
        3,
        "Draw the handshake as a conversation in two columns, client and server, and fill it in one message at a time: ClientHello with key shares, ServerHello, Certificate, CertificateVerify, Finished. After each message ask what an attacker in the middle could do at that point. The key exchange gives secrecy, the certificate and its signature give identity, and the Finished messages detect tampering; ask the student which message provides which. Only after that, mention that TLS 1.3 completes all of this in one round trip.",
    ),
    (
        "key-management",
        "proven",
        0.44,
        "2026-03-16",
        9,
        5,
        "Ask where the key lives, who can read it, how it is rotated and what happens when it leaks; most real breaches fail here, not at the cipher. Use a concrete scenario, such as an API key committed to a public repository, and have the student write the recovery steps.",
    ),
    (
        "password-hashing",
        "candidate",
        0.74,
        "2026-10-10",
        3,
        0,
        "Start from a leaked table of unsalted SHA-256 password hashes and show how a precomputed table cracks common passwords instantly. Then add a salt and a deliberately slow function (bcrypt, scrypt or Argon2) and have the student estimate the attacker's cost per guess before and after.",
    ),
    (
        "elliptic-curves",
        "candidate",
        0.58,
        "2026-09-20",
        2,
        0,
        "Keep it geometric first: sketch y^2 = x^3 + 7 over the reals, add two points with a straight line, reflect, and repeat. Only after point addition feels mechanical, move to a finite field and state that repeated addition is easy to do and hard to undo.",
    ),
    (
        "entropy-and-randomness",
        "candidate",
        0.66,
        "2026-11-22",
        1,
        0,
        "Have the student write down 20 coin flips from their head and compare them with real flips; invented sequences have too few long runs. Use that to explain why keys must come from a cryptographic random source such as the secrets module, never from random.random or a timestamp.",
    ),
]

CRYPTO_RESIDUE_ENTRIES = [
    (
        "buffer-overflow",
        "candidate",
        0.52,
        "2026-08-03",
        1,
        0,
        "If a student raises buffer overflows in a cryptography lesson, say that it is a memory-safety bug rather than a cryptographic one, and use Heartbleed as the bridge: correct cryptography, keys leaked through an over-read. Then return to the lesson.",
    ),
    (
        "rsa",
        "pattern",
        0.55,
        "2026-05-12",
        4,
        1,
        "Build RSA with tiny numbers: p = 5, q = 11, n = 55, e = 3, d = 27, and have the student encrypt m = 7 and decrypt the result back to 7. Only then say that real keys use primes hundreds of digits long, so that factoring n is out of reach.",
    ),
    (
        "steganography",
        "candidate",
        0.41,
        "2026-10-02",
        0,
        1,
        "Separate hiding that a message exists from hiding what it says: show text stored in the low bits of an image's pixels, then ask what changes if the hidden text is also encrypted. Students often call steganography a kind of encryption; correct it with this contrast.",
    ),
    (
        "hashing-for-integrity",
        "pattern",
        0.47,
        "2026-06-18",
        2,
        0,
        "Have the student download a file, compute its SHA-256 and compare it with the published checksum. Then ask what the match proves if the attacker also controls the page that publishes the checksum, which leads toward signatures.",
    ),
    (
        "cryptography",
        "candidate",
        0.45,
        "2026-11-20",
        0,
        0,
        "When a student asks about cryptography in general, ask what they want to protect and from whom before choosing a subtopic. Map the answer to confidentiality, integrity or authenticity and start from the matching concept.",
    ),
]

# One `_unanchored_` entry: high value, retrieves semantically, never reachable by name.
CRYPTO_UNANCHORED = (
    "threat-model-first",
    "proven",
    0.88,
    "2026-02-20",
    125,
    4,
    "Before answering any 'is this secure?' question, ask the student who the attacker is, what the attacker can see and what they are allowed to change. Answers framed by a threat model stick; answers framed as 'this algorithm is strong' do not.",
)

LINUX_ENTRIES = [
    (
        "filesystem-hierarchy",
        "proven",
        0.83,
        "2026-03-03",
        17,
        2,
        "Draw the tree from / down to /home, /etc, /var/log and /usr/bin, and have the student guess where a config file, a log and a program would live before revealing each. Mention that everything hangs off one root, unlike drive letters on Windows.",
    ),
    (
        "absolute-and-relative-paths",
        "proven",
        0.79,
        "2026-03-03",
        14,
        3,
        "Have the student reach the same file twice, once with a path from / and once relative to the current directory, and treat '.' and '..' as real directory entries. Most 'No such file or directory' errors trace back to a wrong assumption about the working directory.",
    ),
    (
        "navigation-commands",
        "proven",
        0.87,
        "2026-03-05",
        22,
        1,
        "Teach pwd, ls and cd as a loop: where am I, what is here, move. Have the student run pwd after every cd for the first few minutes until checking the working directory becomes a habit.",
    ),
    (
        "file-permissions",
        "pattern",
        0.62,
        "2026-03-10",
        8,
        2,
        "Decode one line of ls -l together, splitting rwxr-x--- into owner, group and others, then convert it to 750. Let the student cause a 'Permission denied' error on purpose and fix it with chmod rather than reaching for sudo.",
    ),
    (
        "users-and-groups",
        "pattern",
        0.55,
        "2026-03-10",
        5,
        1,
        "Have the student run id and read /etc/group to see which groups they belong to. Explain root as the one user the permission checks do not apply to, which is exactly why running everything with sudo is a bad habit.",
    ),
    (
        "pipes-and-redirection",
        "proven",
        0.76,
        "2026-03-17",
        16,
        2,
        "Build a pipeline one stage at a time: cat a log, add grep, add sort, add uniq -c, running it after each step. Separate > (to a file) from | (to a program) explicitly, since mixing them up is the most common early mistake.",
    ),
    (
        "processes-and-signals",
        "pattern",
        0.48,
        "2026-04-07",
        3,
        2,
        "Start a long sleep, find it with ps and stop it with kill, then start another and stop it with Ctrl-C, and ask what the difference was. Introduce SIGTERM versus SIGKILL as asking politely versus pulling the plug.",
    ),
    (
        "environment-variables",
        "pattern",
        0.59,
        "2026-04-07",
        6,
        1,
        "Show echo $PATH and ask the student to predict what happens when they run a program that is in none of the listed directories. Then set a variable without export, start a subshell, and let them discover that it did not carry over.",
    ),
    (
        "shell-scripting",
        "candidate",
        0.72,
        "2026-06-15",
        2,
        0,
        'Turn a command the student has already typed three times into a script: shebang line, chmod +x, run it with ./. Add one variable and one if-statement only after the bare script works, and always quote variables as "$name".',
    ),
    (
        "package-management",
        "candidate",
        0.55,
        "2026-11-02",
        1,
        0,
        "Have the student install a small package with apt or dnf, then ask where the binary went and why the command needed sudo. Stress that the package manager tracks every file it installs, which is why copying binaries in by hand causes trouble later.",
    ),
]

DS_ENTRIES = [
    (
        "arrays",
        "proven",
        0.89,
        "2026-04-01",
        31,
        2,
        "Draw an array as numbered boxes in contiguous memory and have the student compute the address of element i from the start address. That arithmetic is why indexing is O(1) and why inserting at the front means shifting everything.",
    ),
    (
        "linked-lists",
        "proven",
        0.78,
        "2026-04-01",
        19,
        3,
        "Act it out with sticky notes: each note holds a value and an arrow to the next. Have the learner insert a node in the middle by changing exactly two arrows, and ask in which order they must change so nothing is lost.",
    ),
    (
        "stacks",
        "proven",
        0.84,
        "2026-04-08",
        23,
        1,
        "Use a stack of plates and the browser back button, then trace push and pop on paper for a short sequence. Have the student check whether '([)]' is balanced using a stack; that exercise is where last-in, first-out clicks.",
    ),
    (
        "queues",
        "pattern",
        0.64,
        "2026-04-08",
        7,
        1,
        "Run the same sequence of operations through a queue that the student just ran through a stack, and compare the outputs. Then show why removing from the front of a Python list is slow while collections.deque is not.",
    ),
    (
        "hash-tables",
        "pattern",
        0.58,
        "2026-04-15",
        6,
        2,
        "Build a hash table with 8 buckets on paper, hashing short names by the sum of their letter values mod 8, until two names collide. Resolve the collision with chaining and ask what happens to lookup time if every name lands in the same bucket.",
    ),
    (
        "trees",
        "proven",
        0.81,
        "2026-04-22",
        17,
        2,
        "Use a folder hierarchy or a family tree and name root, parent, child, leaf and depth on it. Have the student write a recursive function that counts nodes before any ordering or balancing rules appear.",
    ),
    (
        "binary-search-trees",
        "pattern",
        0.53,
        "2026-04-29",
        5,
        2,
        "Insert 50, 30, 70, 20, 40 by hand and have the student find 40 by saying left or right at each node. Then insert 1, 2, 3, 4, 5 in order and let them discover that the tree degenerates into a list.",
    ),
    (
        "heaps",
        "candidate",
        0.71,
        "2026-07-06",
        2,
        0,
        "Draw a min-heap as a tree and then as an array, and have the student compute the children of index i as 2i+1 and 2i+2. Trace one insert with sift-up; the only property to hold onto is that each parent is no larger than its children.",
    ),
    (
        "graphs",
        "candidate",
        0.52,
        "2026-11-24",
        0,
        0,
        "Start from a network the student already knows, such as friends or metro stations, and draw it before naming vertices and edges. Store it as an adjacency list first; bring in the adjacency matrix only when they ask how to test for an edge quickly.",
    ),
    (
        "big-o-notation",
        "proven",
        0.75,
        "2026-04-15",
        15,
        3,
        "Time two versions of a search on lists of 1,000 and 1,000,000 items and let the growth pattern motivate the notation. Keep to O(1), O(log n), O(n) and O(n^2) at first, each tied to code the student has already written.",
    ),
]

# Tutor moves: (topic where observed, slug, maturity, confidence, date, s, f, instruction)
TUTOR_ENTRIES = [
    (
        "cryptography",
        "socratic-questioning",
        "proven",
        0.82,
        "2026-02-11",
        38,
        5,
        "When a student asks for the answer, reply with the smallest question that makes the next step visible, such as 'what would the attacker need to know?'. Give the answer directly after two unproductive questions; prolonged questioning frustrates more than it teaches.",
    ),
    (
        "data-structures",
        "worked-example-first",
        "pattern",
        0.64,
        "2026-04-20",
        11,
        2,
        "For procedural topics, show one fully worked example with every step narrated before asking the student to attempt a near-identical one. Then fade the support: the second example has gaps, the third is theirs.",
    ),
    (
        "cryptography",
        "analogy-then-formalism",
        "proven",
        0.77,
        "2026-03-04",
        27,
        4,
        "Open a new concept with one concrete analogy, such as padlocks for public keys or mixing paint for key exchange, and let the student reason inside it for a few turns. Then say plainly where the analogy breaks, because every analogy does, and move to the formal version. Students who never hear where the analogy stops carry its wrong implications into exams. Keep one analogy per concept; stacking several invites the student to mix their rules. Return to the analogy only as a check, not as the explanation.",
    ),
    (
        "linux-basics",
        "predict-then-run",
        "pattern",
        0.58,
        "2026-05-06",
        9,
        2,
        "Before the student runs a command, ask them to predict its output in one line. A wrong prediction is the most useful moment of the lesson: ask what they expected and why before explaining.",
    ),
    (
        "cryptography",
        "surface-misconceptions",
        "candidate",
        0.72,
        "2026-09-08",
        4,
        0,
        "Open a topic by asking what the student already believes about it, and listen for known misconceptions: hashing is encryption, longer keys are always safer, base64 is secure. Address the misconception explicitly before teaching the correct model, or the old one survives beside it.",
    ),
    (
        "data-structures",
        "teach-back-check",
        "candidate",
        0.55,
        "2026-10-01",
        2,
        0,
        "Close each concept by asking the student to explain it back as if to a friend who missed the class. Gaps in the explanation show which step to revisit; do not accept a definition recited word for word.",
    ),
]

# Student traits: (learner, topic where observed, slug, maturity, confidence, date, s, f, instruction)
STUDENT_ENTRIES = [
    (
        "ada",
        "cryptography",
        "visual-learner-mapping",
        "pattern",
        0.68,
        "2026-03-12",
        6,
        1,
        "Ada understands faster from diagrams than from prose: sketch boxes and arrows for who holds which key and what travels over the wire before explaining. She asks for the picture if none is offered.",
    ),
    (
        "ada",
        "linux-basics",
        "tests-metaphors-to-breaking",
        "proven",
        0.80,
        "2026-03-19",
        14,
        2,
        "Ada probes every analogy for its limits, asking things like 'so what if someone copies the padlock?'. Treat this as engagement, not resistance: say where the metaphor stops and hand her the formal rule at that point.",
    ),
    (
        "ada",
        "data-structures",
        "needs-early-win",
        "candidate",
        0.71,
        "2026-10-27",
        3,
        0,
        "Ada disengages when the first exercise of a session fails. Open with a short task she can finish in under two minutes, then raise the difficulty.",
    ),
    (
        "grace",
        "data-structures",
        "prefers-code-examples",
        "proven",
        0.84,
        "2026-04-16",
        17,
        1,
        "Grace grasps a concept faster from ten lines of Python than from a diagram. Offer a runnable snippet first and let her modify it; prose explanations land better after she has run the code.",
    ),
    (
        "grace",
        "cryptography",
        "visual-model-builder",
        "pattern",
        0.57,
        "2026-06-03",
        5,
        1,
        "Grace builds her own mental model by drawing it and asks to check it against yours. Ask to see her sketch and correct it in place rather than replacing it with a new one.",
    ),
    (
        "grace",
        "linux-basics",
        "skips-to-edge-cases",
        "candidate",
        0.50,
        "2026-11-19",
        1,
        0,
        "Grace jumps to edge cases such as empty input, missing files or root-owned directories before the normal path is solid. Acknowledge the question, park it explicitly and return to it once the main case works.",
    ),
]

# Curated drawings, one per concept platform-wide: (topic, slug, maturity, confidence, date, s, f, instruction)
VISUAL_ENTRIES = [
    (
        "cryptography",
        "aes",
        "proven",
        0.86,
        "2026-02-04",
        12,
        1,
        "Curated drawing: a 4x4 grid of bytes passing through four labelled stations (SubBytes, ShiftRows, MixColumns, AddRoundKey), with the round key entering from the side and a loop arrow marked '10 rounds for AES-128'.",
    ),
    (
        "cryptography",
        "diffie-hellman",
        "proven",
        0.90,
        "2026-02-12",
        19,
        0,
        "Curated drawing: Alice and Bob each mix a shared public paint colour with a secret colour, swap the mixtures across a line watched by Eve, and both arrive at the same final colour; the number version (p = 23, g = 5) is written under each step.",
    ),
    (
        "cryptography",
        "tls-handshake",
        "pattern",
        0.66,
        "2026-03-20",
        7,
        1,
        "Curated drawing: a two-column sequence diagram, client left and server right, with ClientHello, ServerHello, Certificate, CertificateVerify and Finished as arrows; key-exchange arrows in blue, identity in green, integrity checks in orange.",
    ),
    (
        "data-structures",
        "linked-lists",
        "proven",
        0.83,
        "2026-04-03",
        11,
        1,
        "Curated drawing: four boxes, each split into a value half and a pointer half, arrows from each pointer to the next box and a last arrow into a ground symbol labelled None; a second panel shows an insertion with the two changed arrows in red.",
    ),
]

# ---------------------------------------------------------------------------------------
# Edges: (source slug, target slug, type, confidence, condition, created date, hits)
# For prerequisite, the TARGET must be understood before the SOURCE.
# Seed edges are dated the day after their later endpoint was authored.
# ---------------------------------------------------------------------------------------
CRYPTO_SEED_EDGES = [
    # prerequisite (30)
    ("substitution-cipher", "caesar-cipher", "prerequisite", 0.93, None),
    ("frequency-analysis", "substitution-cipher", "prerequisite", 0.92, None),
    ("one-time-pad", "xor", "prerequisite", 0.90, None),
    ("symmetric-encryption", "caesar-cipher", "prerequisite", 0.82, None),
    ("stream-ciphers", "one-time-pad", "prerequisite", 0.88, None),
    ("stream-ciphers", "symmetric-encryption", "prerequisite", 0.80, None),
    ("block-ciphers", "symmetric-encryption", "prerequisite", 0.90, None),
    ("aes", "block-ciphers", "prerequisite", 0.94, None),
    ("aes", "xor", "prerequisite", 0.76, None),
    ("modes-of-operation", "block-ciphers", "prerequisite", 0.91, None),
    ("modes-of-operation", "xor", "prerequisite", 0.72, None),
    ("public-key-cryptography", "symmetric-encryption", "prerequisite", 0.85, None),
    ("public-key-cryptography", "modular-arithmetic", "prerequisite", 0.83, None),
    ("diffie-hellman", "modular-arithmetic", "prerequisite", 0.92, None),
    ("diffie-hellman", "prime-numbers", "prerequisite", 0.84, None),
    ("diffie-hellman", "public-key-cryptography", "prerequisite", 0.79, None),
    ("elliptic-curves", "diffie-hellman", "prerequisite", 0.75, None),
    ("elliptic-curves", "modular-arithmetic", "prerequisite", 0.80, None),
    ("message-authentication-codes", "hash-functions", "prerequisite", 0.90, None),
    ("message-authentication-codes", "symmetric-encryption", "prerequisite", 0.77, None),
    ("digital-signatures", "hash-functions", "prerequisite", 0.88, None),
    ("digital-signatures", "public-key-cryptography", "prerequisite", 0.92, None),
    ("certificates-and-pki", "digital-signatures", "prerequisite", 0.93, None),
    ("tls-handshake", "certificates-and-pki", "prerequisite", 0.90, None),
    ("tls-handshake", "diffie-hellman", "prerequisite", 0.87, None),
    ("tls-handshake", "message-authentication-codes", "prerequisite", 0.73, None),
    ("key-management", "symmetric-encryption", "prerequisite", 0.81, None),
    ("password-hashing", "hash-functions", "prerequisite", 0.89, None),
    ("prime-numbers", "modular-arithmetic", "prerequisite", 0.71, None),
    ("stream-ciphers", "xor", "prerequisite", 0.86, None),
    # fallback (9)
    (
        "frequency-analysis",
        "caesar-cipher",
        "fallback",
        0.78,
        "student cannot see why letter counts reveal the key",
    ),
    (
        "one-time-pad",
        "caesar-cipher",
        "fallback",
        0.76,
        "student cannot picture combining key and message symbol by symbol",
    ),
    (
        "aes",
        "substitution-cipher",
        "fallback",
        0.74,
        "student is lost in the round structure of AES",
    ),
    (
        "diffie-hellman",
        "symmetric-encryption",
        "fallback",
        0.72,
        "student asks what the shared secret is actually for",
    ),
    (
        "public-key-cryptography",
        "key-management",
        "fallback",
        0.75,
        "student asks why everyone cannot just share one key",
    ),
    (
        "digital-signatures",
        "message-authentication-codes",
        "fallback",
        0.77,
        "student thinks a signature is encryption with the private key",
    ),
    (
        "tls-handshake",
        "public-key-cryptography",
        "fallback",
        0.80,
        "student cannot say which keys are long-term and which are per-session",
    ),
    (
        "modes-of-operation",
        "frequency-analysis",
        "fallback",
        0.79,
        "student does not see why identical ECB blocks leak information",
    ),
    (
        "hash-functions",
        "symmetric-encryption",
        "fallback",
        0.83,
        "student confuses hashing with encryption and asks how to decrypt a hash",
    ),
    # leads_to (10)
    (
        "caesar-cipher",
        "substitution-cipher",
        "leads_to",
        0.90,
        "student can shift and unshift a message by hand",
    ),
    (
        "substitution-cipher",
        "frequency-analysis",
        "leads_to",
        0.91,
        "student believes the huge key space makes it unbreakable",
    ),
    (
        "caesar-cipher",
        "modular-arithmetic",
        "leads_to",
        0.86,
        "student notices the wrap-around from Z back to A",
    ),
    ("xor", "one-time-pad", "leads_to", 0.88, "student can XOR two bytes and undo it"),
    (
        "symmetric-encryption",
        "block-ciphers",
        "leads_to",
        0.82,
        "student accepts the shared-key model and asks how real ciphers work",
    ),
    (
        "block-ciphers",
        "modes-of-operation",
        "leads_to",
        0.87,
        "student asks how to encrypt more than one block",
    ),
    (
        "public-key-cryptography",
        "diffie-hellman",
        "leads_to",
        0.85,
        "student asks how two strangers agree on a key",
    ),
    (
        "hash-functions",
        "message-authentication-codes",
        "leads_to",
        0.84,
        "student asks what stops an attacker re-hashing tampered data",
    ),
    (
        "digital-signatures",
        "certificates-and-pki",
        "leads_to",
        0.89,
        "student asks how you know a public key belongs to someone",
    ),
    (
        "certificates-and-pki",
        "tls-handshake",
        "leads_to",
        0.86,
        "student can follow a certificate chain from leaf to root",
    ),
    # related (9)
    ("aes", "stream-ciphers", "related", 0.70, None),
    ("diffie-hellman", "elliptic-curves", "related", 0.78, None),
    ("hash-functions", "password-hashing", "related", 0.80, None),
    ("key-management", "certificates-and-pki", "related", 0.76, None),
    ("message-authentication-codes", "digital-signatures", "related", 0.79, None),
    ("modular-arithmetic", "prime-numbers", "related", 0.81, None),
    ("caesar-cipher", "xor", "related", 0.72, None),
    ("symmetric-encryption", "public-key-cryptography", "related", 0.83, None),
    ("block-ciphers", "stream-ciphers", "related", 0.84, None),
    # supersedes (2)
    ("password-hashing", "hash-functions", "supersedes", 0.90, None),
    ("stream-ciphers", "one-time-pad", "supersedes", 0.76, None),
]

# Learned edges: only the observable relations (sequence, recovery, stated causation).
# (source, target, type, confidence, condition, created date, hit_count)
CRYPTO_LEARNED_EDGES = [
    # prerequisite, from explicit struggle evidence (7)
    ("one-time-pad", "entropy-and-randomness", "prerequisite", 0.31, None, "2026-11-26", 1),
    ("tls-handshake", "symmetric-encryption", "prerequisite", 0.62, None, "2026-10-03", 4),
    ("digital-signatures", "modular-arithmetic", "prerequisite", 0.45, None, "2026-09-14", 2),
    (
        "certificates-and-pki",
        "public-key-cryptography",
        "prerequisite",
        0.68,
        None,
        "2026-07-11",
        5,
    ),
    ("elliptic-curves", "prime-numbers", "prerequisite", 0.57, None, "2026-10-09", 3),
    ("key-management", "public-key-cryptography", "prerequisite", 0.41, None, "2026-09-28", 2),
    ("password-hashing", "entropy-and-randomness", "prerequisite", 0.30, None, "2026-11-28", 1),
    # fallback, from recovery (8)
    (
        "diffie-hellman",
        "modular-arithmetic",
        "fallback",
        0.66,
        "student cannot compute g^a mod p by hand",
        "2026-08-19",
        4,
    ),
    ("aes", "xor", "fallback", 0.48, "student is stuck on what AddRoundKey does", "2026-09-30", 2),
    (
        "modes-of-operation",
        "caesar-cipher",
        "fallback",
        0.25,
        "student is lost in the CBC chaining diagram",
        "2026-05-02",
        1,
    ),
    (
        "certificates-and-pki",
        "key-management",
        "fallback",
        0.53,
        "student confuses a certificate with a private key",
        "2026-10-15",
        3,
    ),
    (
        "message-authentication-codes",
        "hash-functions",
        "fallback",
        0.72,
        "student thinks a plain hash stops forgery",
        "2026-06-22",
        6,
    ),
    (
        "elliptic-curves",
        "diffie-hellman",
        "fallback",
        0.33,
        "student is lost in point addition",
        "2026-11-18",
        1,
    ),
    (
        "stream-ciphers",
        "xor",
        "fallback",
        0.44,
        "student cannot see how the keystream is combined with the message",
        "2026-09-21",
        2,
    ),
    (
        "public-key-cryptography",
        "modular-arithmetic",
        "fallback",
        0.39,
        "student asks why the trapdoor is hard to reverse",
        "2026-10-11",
        2,
    ),
    # leads_to, from sequence (10)
    (
        "caesar-cipher",
        "xor",
        "leads_to",
        0.30,
        "student breezes through shift ciphers",
        "2026-06-14",
        1,
    ),
    (
        "frequency-analysis",
        "one-time-pad",
        "leads_to",
        0.64,
        "student asks which cipher frequency analysis cannot break",
        "2026-07-30",
        4,
    ),
    (
        "one-time-pad",
        "stream-ciphers",
        "leads_to",
        0.70,
        "student objects that the key is as long as the message",
        "2026-05-21",
        5,
    ),
    (
        "modular-arithmetic",
        "diffie-hellman",
        "leads_to",
        0.58,
        "student is comfortable with exponentiation mod p",
        "2026-08-05",
        3,
    ),
    (
        "hash-functions",
        "password-hashing",
        "leads_to",
        0.60,
        "student asks how websites store passwords",
        "2026-10-29",
        3,
    ),
    (
        "aes",
        "modes-of-operation",
        "leads_to",
        0.55,
        "student asks what happens with a long file",
        "2026-09-09",
        3,
    ),
    (
        "tls-handshake",
        "key-management",
        "leads_to",
        0.35,
        "student asks where the server's private key lives",
        "2026-07-02",
        2,
    ),
    (
        "diffie-hellman",
        "tls-handshake",
        "leads_to",
        0.67,
        "student asks where key exchange is used in practice",
        "2026-08-27",
        4,
    ),
    (
        "message-authentication-codes",
        "digital-signatures",
        "leads_to",
        0.50,
        "student asks how a stranger could verify the tag",
        "2026-09-17",
        2,
    ),
    (
        "prime-numbers",
        "public-key-cryptography",
        "leads_to",
        0.32,
        "student asks why primes matter",
        "2026-11-21",
        1,
    ),
]

# Enriched edges: hypotheses proposed by a model from concept descriptions (hit_count 0).
CRYPTO_ENRICHED_EDGES = [
    ("elliptic-curves", "diffie-hellman", "supersedes", 0.38, None, "2026-10-05"),
    ("frequency-analysis", "entropy-and-randomness", "related", 0.42, None, "2026-11-25"),
    ("prime-numbers", "frequency-analysis", "related", 0.32, None, "2026-07-20"),
    ("certificates-and-pki", "modular-arithmetic", "prerequisite", 0.20, None, "2026-08-01"),
    ("key-management", "entropy-and-randomness", "prerequisite", 0.45, None, "2026-11-27"),
    ("stream-ciphers", "entropy-and-randomness", "related", 0.40, None, "2026-11-27"),
    ("password-hashing", "key-management", "related", 0.37, None, "2026-10-20"),
    ("tls-handshake", "aes", "related", 0.48, None, "2026-07-15"),
    ("block-ciphers", "xor", "prerequisite", 0.43, None, "2026-06-30"),
    (
        "entropy-and-randomness",
        "one-time-pad",
        "leads_to",
        0.39,
        "student understands why keys must be unpredictable",
        "2026-11-26",
    ),
    ("modes-of-operation", "stream-ciphers", "related", 0.46, None, "2026-08-12"),
    ("elliptic-curves", "digital-signatures", "related", 0.33, None, "2026-10-30"),
]

# The edges the nightly cull removes at the demo "now" (source, target, type).
CULLABLE = {
    ("modes-of-operation", "caesar-cipher", "fallback"),
    ("caesar-cipher", "xor", "leads_to"),
    ("prime-numbers", "frequency-analysis", "related"),
    ("certificates-and-pki", "modular-arithmetic", "prerequisite"),
}
# Candidates the daily promotion lifts to pattern at the demo "now": (scope, topic, slug).
PROMOTABLE = {
    ("public", "cryptography", "password-hashing"),
    ("public", "cryptography", "elliptic-curves"),
    ("public", "cryptography", "buffer-overflow"),
    ("public", "linux-basics", "shell-scripting"),
    ("public", "linux-basics", "package-management"),
    ("public", "data-structures", "heaps"),
    ("tutor", "cryptography", "surface-misconceptions"),
    ("tutor", "data-structures", "teach-back-check"),
    ("student:ada", "data-structures", "needs-early-win"),
}

LINUX_SEED_EDGES = [
    ("absolute-and-relative-paths", "filesystem-hierarchy", "prerequisite", 0.90, None),
    ("navigation-commands", "absolute-and-relative-paths", "prerequisite", 0.88, None),
    ("file-permissions", "users-and-groups", "prerequisite", 0.87, None),
    ("pipes-and-redirection", "navigation-commands", "prerequisite", 0.80, None),
    ("shell-scripting", "pipes-and-redirection", "prerequisite", 0.85, None),
    ("shell-scripting", "environment-variables", "prerequisite", 0.78, None),
    ("shell-scripting", "file-permissions", "prerequisite", 0.74, None),
    ("package-management", "users-and-groups", "prerequisite", 0.72, None),
    (
        "navigation-commands",
        "file-permissions",
        "leads_to",
        0.83,
        "student hits 'Permission denied' while exploring",
    ),
    ("environment-variables", "processes-and-signals", "related", 0.75, None),
    (
        "file-permissions",
        "navigation-commands",
        "fallback",
        0.79,
        "student cannot read the ls -l output",
    ),
]
LINUX_LEARNED_EDGES = [
    (
        "shell-scripting",
        "absolute-and-relative-paths",
        "fallback",
        0.56,
        "script fails with 'command not found' because ./ was left off",
        "2026-08-11",
        3,
    ),
    (
        "pipes-and-redirection",
        "processes-and-signals",
        "leads_to",
        0.47,
        "student asks what happens when one side of a pipe exits",
        "2026-09-02",
        2,
    ),
    ("package-management", "environment-variables", "prerequisite", 0.41, None, "2026-11-12", 2),
]

DS_SEED_EDGES = [
    ("linked-lists", "arrays", "prerequisite", 0.85, None),
    ("stacks", "arrays", "prerequisite", 0.80, None),
    ("queues", "linked-lists", "prerequisite", 0.78, None),
    ("hash-tables", "arrays", "prerequisite", 0.88, None),
    ("hash-tables", "big-o-notation", "prerequisite", 0.76, None),
    ("trees", "linked-lists", "prerequisite", 0.84, None),
    ("binary-search-trees", "trees", "prerequisite", 0.93, None),
    ("binary-search-trees", "big-o-notation", "prerequisite", 0.80, None),
    ("heaps", "trees", "prerequisite", 0.86, None),
    ("graphs", "trees", "prerequisite", 0.70, None),
    ("stacks", "queues", "leads_to", 0.82, "student can trace push and pop on paper"),
    ("heaps", "queues", "related", 0.74, None),
    (
        "binary-search-trees",
        "arrays",
        "fallback",
        0.77,
        "student cannot see why each comparison halves the search",
    ),
]
DS_LEARNED_EDGES = [
    (
        "linked-lists",
        "arrays",
        "fallback",
        0.58,
        "student loses track of the next pointers",
        "2026-07-14",
        3,
    ),
    (
        "hash-tables",
        "graphs",
        "leads_to",
        0.44,
        "student asks how to store who follows whom",
        "2026-11-26",
        2,
    ),
]


# ---------------------------------------------------------------------------------------
# Building
# ---------------------------------------------------------------------------------------
def entry_id(topic: str, scope: str, slug: str, suffix: str | None = None) -> str:
    name = f"hag-demo:{topic}:{scope}:{slug}"
    if suffix:
        name += f":{suffix}"
    return str(uuid.uuid5(uuid.NAMESPACE_URL, name))


def edge_id(src: str, tgt: str, edge_type: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"hag-demo-edge:{src}:{tgt}:{edge_type}"))


def ts(day: str, hour: int = 10) -> str:
    return f"{day}T{hour:02d}:00:00Z"


def parse_ts(value: str) -> datetime:
    return datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)


def make_entry(
    topic: str,
    scope: str,
    slug: str,
    maturity: str,
    conf: float,
    day: str,
    s: int,
    f: int,
    text: str,
    quality: float = Q_CATALOGUE,
    eid: str | None = None,
) -> dict[str, Any]:
    return {
        "id": eid or entry_id(topic, scope, slug),
        "topic_id": topic,
        "concept_slug": slug,
        "visibility_scope": scope,
        "maturity": maturity,
        "confidence": conf,
        "concept_match_quality": quality,
        "instruction": text,
        "success_count": s,
        "failure_count": f,
        "created_at": ts(day),
    }


def build() -> dict[str, Any]:
    topics = [{"topic_id": t, "title": title} for t, title in TOPICS]

    concepts: list[dict[str, Any]] = []
    for topic, rows, origin in (
        ("cryptography", CRYPTO_CONCEPTS, "catalogue"),
        ("cryptography", CRYPTO_RESIDUE_CONCEPTS, "minted"),
        ("linux-basics", LINUX_CONCEPTS, "catalogue"),
        ("data-structures", DS_CONCEPTS, "catalogue"),
    ):
        for slug, title, desc, aliases in rows:
            concepts.append(
                {
                    "topic_id": topic,
                    "slug": slug,
                    "title": title,
                    "description": desc,
                    "aliases": list(aliases),
                    "origin": origin,
                }
            )

    entries: list[dict[str, Any]] = []
    public_ids: dict[tuple[str, str], str] = {}
    for topic, entry_rows, quality in (
        ("cryptography", CRYPTO_ENTRIES, Q_CATALOGUE),
        ("cryptography", CRYPTO_RESIDUE_ENTRIES, Q_MINTED),
        ("linux-basics", LINUX_ENTRIES, Q_CATALOGUE),
        ("data-structures", DS_ENTRIES, Q_CATALOGUE),
    ):
        for slug, mat, conf, day, s, f, text in entry_rows:
            e = make_entry(topic, "public", slug, mat, conf, day, s, f, text, quality)
            entries.append(e)
            public_ids[(topic, slug)] = e["id"]

    suffix, mat, conf, day, s, f, text = CRYPTO_UNANCHORED
    entries.append(
        make_entry(
            "cryptography",
            "public",
            UNANCHORED,
            mat,
            conf,
            day,
            s,
            f,
            text,
            Q_UNANCHORED,
            entry_id("cryptography", "public", UNANCHORED, suffix),
        )
    )
    for topic, slug, mat, conf, day, s, f, text in TUTOR_ENTRIES:
        entries.append(make_entry(topic, "tutor", slug, mat, conf, day, s, f, text))
    for learner, topic, slug, mat, conf, day, s, f, text in STUDENT_ENTRIES:
        entries.append(make_entry(topic, f"student:{learner}", slug, mat, conf, day, s, f, text))
    for topic, slug, mat, conf, day, s, f, text in VISUAL_ENTRIES:
        entries.append(make_entry(topic, "visual", slug, mat, conf, day, s, f, text))

    created = {e["id"]: parse_ts(e["created_at"]) for e in entries}
    edges: list[dict[str, Any]] = []
    session_no = 0

    def add(
        topic: str,
        src: str,
        tgt: str,
        etype: str,
        conf: float,
        cond: str | None,
        source_type: str,
        when: str | None = None,
        hits: int = 0,
    ) -> None:
        nonlocal session_no
        s_id, t_id = public_ids[(topic, src)], public_ids[(topic, tgt)]
        if when is None:  # authored the day after the later endpoint
            when_ts = ts(
                (max(created[s_id], created[t_id]) + timedelta(days=1)).strftime("%Y-%m-%d")
            )
        else:
            when_ts = ts(when, 14 if source_type == "learned" else 3)
        session = None
        if source_type == "learned":
            session_no += 1
            session = f"demo-session-{session_no:04d}"
        edges.append(
            {
                "id": edge_id(s_id, t_id, etype),
                "source_entry_id": s_id,
                "target_entry_id": t_id,
                "edge_type": etype,
                "confidence": conf,
                "source_type": source_type,
                "condition": cond,
                "hit_count": hits,
                "source_session_id": session,
                "created_at": when_ts,
            }
        )

    for topic, seed, learned, enriched in (
        ("cryptography", CRYPTO_SEED_EDGES, CRYPTO_LEARNED_EDGES, CRYPTO_ENRICHED_EDGES),
        ("linux-basics", LINUX_SEED_EDGES, LINUX_LEARNED_EDGES, []),
        ("data-structures", DS_SEED_EDGES, DS_LEARNED_EDGES, []),
    ):
        for src, tgt, etype, conf, cond in seed:
            add(topic, src, tgt, etype, conf, cond, "seed")
        for src, tgt, etype, conf, cond, day, hits in learned:
            add(topic, src, tgt, etype, conf, cond, "learned", day, hits)
        for src, tgt, etype, conf, cond, day in enriched:
            add(topic, src, tgt, etype, conf, cond, "enriched", day)

    topic_order = {t: i for i, (t, _) in enumerate(TOPICS)}
    concepts.sort(key=lambda c: (topic_order[c["topic_id"]], c["slug"]))
    entries.sort(
        key=lambda e: (
            topic_order[e["topic_id"]],
            e["visibility_scope"],
            e["concept_slug"],
            e["id"],
        )
    )
    edges.sort(key=lambda e: (e["source_entry_id"], e["target_entry_id"], e["edge_type"]))
    return {"topics": topics, "concepts": concepts, "entries": entries, "edges": edges}


# ---------------------------------------------------------------------------------------
# Verification
# ---------------------------------------------------------------------------------------
def _sentences(text: str) -> int:
    return len(re.findall(r"[.!?](?:\s|$)", text))


def _acyclic(nodes: set[str], arcs: list[tuple[str, str]]) -> bool:
    out = defaultdict(list)
    indeg = dict.fromkeys(nodes, 0)
    for a, b in arcs:
        out[a].append(b)
        indeg[b] += 1
    todo = [n for n, d in indeg.items() if d == 0]
    seen = 0
    while todo:
        n = todo.pop()
        seen += 1
        for m in out[n]:
            indeg[m] -= 1
            if indeg[m] == 0:
                todo.append(m)
    return seen == len(nodes)


def verify(corpus: dict[str, Any]) -> dict[str, Any]:
    topics = {t["topic_id"] for t in corpus["topics"]}
    concepts = {(c["topic_id"], c["slug"]) for c in corpus["concepts"]}
    entries = corpus["entries"]
    edges = corpus["edges"]
    by_id = {e["id"]: e for e in entries}
    assert len(by_id) == len(entries), "entry ids are unique"
    assert len({e["id"] for e in edges}) == len(edges), "edge ids are unique"
    assert len(concepts) == len(corpus["concepts"]), "concepts are unique per topic"
    assert {"cryptography", "linux-basics", "data-structures"} <= topics
    assert all(c["topic_id"] in topics and SLUG_RE.match(c["slug"]) for c in corpus["concepts"])

    # Entries: shapes, identity, slugs, confidence, qualities, instructions.
    identities: set[tuple[str, ...]] = set()
    for e in entries:
        assert e["topic_id"] in topics
        assert "embedding" not in e
        assert e["maturity"] in ("candidate", "pattern", "proven")
        assert 0 < e["confidence"] < 1
        assert e["concept_slug"] == UNANCHORED or SLUG_RE.match(e["concept_slug"]), e[
            "concept_slug"
        ]
        scope = e["visibility_scope"]
        ident: tuple[str, ...]
        if scope == "visual":
            ident = ("visual", e["concept_slug"])
        elif e["concept_slug"] == UNANCHORED:
            ident = ("unanchored", e["id"])
        elif scope.startswith("student:"):
            ident = ("student", scope, e["concept_slug"])
        else:
            ident = ("topic", e["topic_id"], e["concept_slug"], scope)
        assert ident not in identities, f"duplicate identity {ident}"
        identities.add(ident)
        if scope in ("public", "visual") and e["concept_slug"] != UNANCHORED:
            assert (e["topic_id"], e["concept_slug"]) in concepts, (
                f"no concept row for {e['concept_slug']}"
            )
        text = e["instruction"]
        assert _sentences(text) >= 1 and len(text) <= 700, e["concept_slug"]
        assert parse_ts(e["created_at"]) < DEMO_NOW
        assert parse_ts(e["created_at"]) >= datetime(2026, 1, 1, tzinfo=UTC)
    long_texts = [e for e in entries if len(e["instruction"]) > 400]
    assert len(long_texts) == 3 and all(_sentences(e["instruction"]) >= 4 for e in long_texts)
    assert all(_sentences(e["instruction"]) <= 3 for e in entries if len(e["instruction"]) <= 400)

    crypto_public = [
        e for e in entries if e["topic_id"] == "cryptography" and e["visibility_scope"] == "public"
    ]
    assert len(crypto_public) == 29
    unanchored = [e for e in entries if e["concept_slug"] == UNANCHORED]
    assert len(unanchored) == 1 and unanchored[0]["concept_match_quality"] == Q_UNANCHORED
    assert not any(c[1] == UNANCHORED for c in concepts)
    for e in crypto_public:
        want = (
            Q_MINTED
            if e["concept_slug"] in RESIDUE
            else Q_UNANCHORED
            if e["concept_slug"] == UNANCHORED
            else Q_CATALOGUE
        )
        assert e["concept_match_quality"] == want, e["concept_slug"]

    scopes = Counter(e["visibility_scope"] for e in entries)
    assert scopes["tutor"] == 6
    assert scopes["student:ada"] == 3 and scopes["student:grace"] == 3
    assert scopes["visual"] == 4
    for topic in ("linux-basics", "data-structures"):
        n = sum(1 for e in entries if e["topic_id"] == topic and e["visibility_scope"] == "public")
        assert 8 <= n <= 12, topic

    # Visibility floors and promotion.
    floors = {
        "proven": DIALS.floor_proven,
        "pattern": DIALS.floor_pattern,
        "candidate": DIALS.floor_candidate,
    }
    global_floor = DIALS.retrieval_min_confidence
    invisible = [e for e in entries if e["confidence"] < max(global_floor, floors[e["maturity"]])]
    assert sum(1 for e in invisible if e["maturity"] == "candidate") >= 2
    cutoff14 = DEMO_NOW - timedelta(days=DIALS.promotion_min_age_days)
    promotable = {
        (e["visibility_scope"], e["topic_id"], e["concept_slug"])
        for e in entries
        if e["maturity"] == "candidate"
        and parse_ts(e["created_at"]) <= cutoff14
        and e["confidence"] >= DIALS.promotion_min_confidence
        and e["failure_count"] <= DIALS.promotion_max_failures
    }
    assert promotable == PROMOTABLE, promotable ^ PROMOTABLE

    # Edges: general invariants.
    triples = set()
    for g in edges:
        s, t = g["source_entry_id"], g["target_entry_id"]
        assert s in by_id and t in by_id and s != t
        assert by_id[s]["topic_id"] == by_id[t]["topic_id"]
        assert by_id[s]["visibility_scope"] == by_id[t]["visibility_scope"] == "public"
        key = (s, t, g["edge_type"])
        assert key not in triples, key
        triples.add(key)
        if g["edge_type"] in ("fallback", "leads_to"):
            assert g["condition"] and len(g["condition"]) < 120
        else:
            assert g["condition"] is None
        assert parse_ts(g["created_at"]) >= max(
            parse_ts(by_id[s]["created_at"]), parse_ts(by_id[t]["created_at"])
        )
        assert parse_ts(g["created_at"]) < DEMO_NOW
        assert 0.05 <= g["confidence"] <= 1
        st = g["source_type"]
        if st == "seed":
            assert (
                0.70 <= g["confidence"] <= 0.95
                and g["hit_count"] == 0
                and g["source_session_id"] is None
            )
        elif st == "learned":
            assert 0.05 <= g["confidence"] <= 0.75 and 1 <= g["hit_count"] <= 6
            assert re.fullmatch(r"demo-session-\d{4}", g["source_session_id"])
            assert g["edge_type"] in ("prerequisite", "fallback", "leads_to")
        else:
            assert st == "enriched" and 0.05 <= g["confidence"] <= 0.50
            assert g["hit_count"] == 0 and g["source_session_id"] is None
    assert len({g["source_session_id"] for g in edges if g["source_session_id"]}) == sum(
        1 for g in edges if g["source_type"] == "learned"
    )

    # Prerequisite edges form a DAG, per topic (edges never cross topics).
    prereq = [
        (g["source_entry_id"], g["target_entry_id"])
        for g in edges
        if g["edge_type"] == "prerequisite"
    ]
    assert _acyclic({n for arc in prereq for n in arc}, prereq), "prerequisite edges have a cycle"

    # Cryptography graph.
    crypto_ids = {e["id"] for e in crypto_public}
    crypto_edges = [g for g in edges if g["source_entry_id"] in crypto_ids]
    assert len(crypto_edges) == 97
    types = Counter(g["edge_type"] for g in crypto_edges)
    assert set(types) == {"prerequisite", "fallback", "leads_to", "related", "supersedes"}
    prov = Counter(g["source_type"] for g in crypto_edges)
    assert prov == {"seed": 60, "learned": 25, "enriched": 12}, prov
    touched = {g["source_entry_id"] for g in crypto_edges} | {
        g["target_entry_id"] for g in crypto_edges
    }
    orphans = {
        e["id"]
        for e in crypto_public
        if e["concept_slug"] in RESIDUE or e["concept_slug"] == UNANCHORED
    }
    assert len(orphans) == 6 and not (touched & orphans), "orphans and _unanchored_ have no edges"
    assert touched == crypto_ids - orphans and len(touched) == 23, (
        "every canonical entry is connected"
    )

    # The cull at the demo "now": exactly CULLABLE; neighbours on both sides of each rule.
    cutoff90 = DEMO_NOW - timedelta(days=DIALS.cull_min_age_days)
    slug = {e["id"]: e["concept_slug"] for e in entries}

    def culled(g: dict[str, Any]) -> bool:
        return (
            g["source_type"] in DIALS.cull_source_types
            and g["confidence"] < DIALS.cull_max_confidence
            and parse_ts(g["created_at"]) <= cutoff90
        )

    cull = {
        (slug[g["source_entry_id"]], slug[g["target_entry_id"]], g["edge_type"])
        for g in edges
        if culled(g)
    }
    assert cull == CULLABLE, cull ^ CULLABLE
    low_young = [
        g for g in edges if g["source_type"] != "seed" and g["confidence"] < 0.35 and not culled(g)
    ]
    assert len(low_young) >= 3
    assert any(g["confidence"] == 0.35 and parse_ts(g["created_at"]) <= cutoff90 for g in edges)

    # Other topics: 10-20 seed/learned edges of mixed types.
    other = {}
    for topic in ("linux-basics", "data-structures"):
        ids = {
            e["id"] for e in entries if e["topic_id"] == topic and e["visibility_scope"] == "public"
        }
        tedges = [g for g in edges if g["source_entry_id"] in ids]
        assert 10 <= len(tedges) <= 20, topic
        assert {g["source_type"] for g in tedges} == {"seed", "learned"}
        assert len({g["edge_type"] for g in tedges}) >= 4
        other[topic] = len(tedges)

    return {
        "topics": len(corpus["topics"]),
        "concepts": len(corpus["concepts"]),
        "entries": len(entries),
        "entries_by_scope": dict(sorted(scopes.items())),
        "edges": len(edges),
        "crypto_public_entries": len(crypto_public),
        "crypto_edges": len(crypto_edges),
        "crypto_edge_types": dict(sorted(types.items())),
        "crypto_edge_provenance": dict(sorted(prov.items())),
        "other_topic_edges": other,
        "cullable_at_2026-11-30": len(cull),
        "promotable_at_2026-11-30": len(promotable),
        "invisible_entries": len(invisible),
        "instructions_over_400_chars": len(long_texts),
    }


def main() -> None:
    corpus = build()
    summary = verify(corpus)
    OUT.write_text(json.dumps(corpus, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {OUT}")
    for key, value in summary.items():
        print(f"  {key}: {value}")


if __name__ == "__main__":
    main()
