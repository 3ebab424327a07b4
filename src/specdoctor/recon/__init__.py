"""Static reconnaissance: engine source out of images, wheels and environments, as snapshots.

`specdoctor recon extract SOURCE --pick vllm -o DIR` writes the speculative-decoding
code path and a manifest (source digest, package version, sha256 per file);
`specdoctor recon diff A B` shows what changed between two snapshots.
"""
