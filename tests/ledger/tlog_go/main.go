// Command certacheck checks certa's transparency-log outputs with Go's golang.org/x/mod/sumdb packages, an
// implementation independent of certa's (tests/ledger/test_tlog_go.py builds and runs it). It reads one JSON
// request on standard input and writes one JSON answer on standard output:
//
//   - note, verifier_keys: note.Open verifies the signed note with the verifier keys ("<name>+<hash>+<key>") and
//     the checkpoint text's origin, tree size and base64 root are read;
//   - leaves: certa's leaf inputs (the hex entry hashes); tlog hashes them (tlog.RecordHash) and answers the tree
//     hash of every prefix (tlog.TreeHash);
//   - consistency: for each (old, new, roots, proof), tlog.CheckTree's verdict and tlog.ProveTree's own proof;
//   - inclusion: for each (index, size, root, proof), tlog.CheckRecord's verdict on leaf index.
package main

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

type consistency struct {
	Old     int64    `json:"old"`
	New     int64    `json:"new"`
	OldRoot string   `json:"old_root"`
	NewRoot string   `json:"new_root"`
	Proof   []string `json:"proof"`
}

type inclusion struct {
	Index int64    `json:"index"`
	Size  int64    `json:"size"`
	Root  string   `json:"root"`
	Proof []string `json:"proof"`
}

type request struct {
	Note         string        `json:"note"`
	VerifierKeys []string      `json:"verifier_keys"`
	Leaves       []string      `json:"leaves"`
	Consistency  []consistency `json:"consistency"`
	Inclusion    []inclusion   `json:"inclusion"`
}

type answer struct {
	NoteError   string     `json:"note_error"`
	Signers     []string   `json:"signers"`
	Unverified  []string   `json:"unverified"`
	Origin      string     `json:"origin"`
	TreeSize    int64      `json:"tree_size"`
	RootHash    string     `json:"root_hash"`
	TreeHashes  []string   `json:"tree_hashes"`
	Consistency []string   `json:"consistency"`
	GoProofs    [][]string `json:"go_proofs"`
	Inclusion   []string   `json:"inclusion"`
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "certacheck:", err)
	os.Exit(2)
}

func hashOf(text string) tlog.Hash {
	var h tlog.Hash
	raw, err := hex.DecodeString(text)
	if err != nil || len(raw) != len(h) {
		fail(fmt.Errorf("not a hex SHA-256: %q", text))
	}
	copy(h[:], raw)
	return h
}

func hashesOf(texts []string) []tlog.Hash {
	hashes := make([]tlog.Hash, len(texts))
	for i, text := range texts {
		hashes[i] = hashOf(text)
	}
	return hashes
}

func hexOf(hashes []tlog.Hash) []string {
	texts := []string{}
	for _, h := range hashes {
		texts = append(texts, hex.EncodeToString(h[:]))
	}
	return texts
}

func openNote(req request, out *answer) {
	var verifiers []note.Verifier
	for _, key := range req.VerifierKeys {
		v, err := note.NewVerifier(key)
		if err != nil {
			fail(err)
		}
		verifiers = append(verifiers, v)
	}
	n, err := note.Open([]byte(req.Note), note.VerifierList(verifiers...))
	if err != nil {
		out.NoteError = err.Error()
		return
	}
	for _, sig := range n.Sigs {
		out.Signers = append(out.Signers, fmt.Sprintf("%s+%08x", sig.Name, sig.Hash))
	}
	for _, sig := range n.UnverifiedSigs {
		out.Unverified = append(out.Unverified, sig.Name)
	}
	lines := strings.SplitN(n.Text, "\n", 4)
	if len(lines) < 4 {
		out.NoteError = "a checkpoint text has an origin, a size and a root line"
		return
	}
	size, err := strconv.ParseInt(lines[1], 10, 64)
	if err != nil {
		out.NoteError = err.Error()
		return
	}
	root, err := tlog.ParseHash(lines[2])
	if err != nil {
		out.NoteError = err.Error()
		return
	}
	out.Origin, out.TreeSize, out.RootHash = lines[0], size, hex.EncodeToString(root[:])
}

func main() {
	var req request
	if err := json.NewDecoder(os.Stdin).Decode(&req); err != nil {
		fail(err)
	}
	out := answer{TreeHashes: []string{}, Consistency: []string{}, GoProofs: [][]string{}, Inclusion: []string{}}
	if req.Note != "" {
		openNote(req, &out)
	}
	var stored []tlog.Hash // tlog's own storage of the tree, built leaf by leaf
	reader := tlog.HashReaderFunc(func(indexes []int64) ([]tlog.Hash, error) {
		hashes := make([]tlog.Hash, len(indexes))
		for i, index := range indexes {
			hashes[i] = stored[index]
		}
		return hashes, nil
	})
	for i, leaf := range hashesOf(req.Leaves) {
		more, err := tlog.StoredHashesForRecordHash(int64(i), tlog.RecordHash(leaf[:]), reader)
		if err != nil {
			fail(err)
		}
		stored = append(stored, more...)
		h, err := tlog.TreeHash(int64(i+1), reader)
		if err != nil {
			fail(err)
		}
		out.TreeHashes = append(out.TreeHashes, hex.EncodeToString(h[:]))
	}
	for _, c := range req.Consistency {
		verdict := "ok"
		if err := tlog.CheckTree(hashesOf(c.Proof), c.New, hashOf(c.NewRoot), c.Old, hashOf(c.OldRoot)); err != nil {
			verdict = err.Error()
		}
		out.Consistency = append(out.Consistency, verdict)
		goProof := []string{}
		if c.New <= int64(len(req.Leaves)) && c.Old >= 1 && c.Old <= c.New {
			p, err := tlog.ProveTree(c.New, c.Old, reader)
			if err != nil {
				fail(err)
			}
			goProof = hexOf(p)
		}
		out.GoProofs = append(out.GoProofs, goProof)
	}
	for _, c := range req.Inclusion {
		verdict := "ok"
		leaf := hashOf(req.Leaves[c.Index])
		if err := tlog.CheckRecord(hashesOf(c.Proof), c.Size, hashOf(c.Root), c.Index, tlog.RecordHash(leaf[:])); err != nil {
			verdict = err.Error()
		}
		out.Inclusion = append(out.Inclusion, verdict)
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		fail(err)
	}
}
