# Sourced by the packaging tests: every ELF file in an unpacked tarball's
# libexec/ and lib/ must find each library it names (ELF NEEDED) packed in
# lib/, or be the host's C/C++ runtime or GPU stack.
#   check_elf_closure DIR      prints what is left to the host; exits 1 on a gap
check_elf_closure() {
  local dir="$1" elf needed unresolved=()
  local runtime='^(ld-linux.*|libc|libm|libpthread|libdl|librt|libresolv|libgcc_s|libstdc\+\+)\.so'
  local gpu='^(libcuda|libcudart|libcudnn[a-z_]*|libnvidia-[a-z-]*)\.so'
  while read -r elf; do
    while read -r needed; do
      [[ -e "$dir/lib/$needed" ]] && continue
      [[ "$needed" =~ $runtime ]] && continue
      if ! [[ "$needed" =~ $gpu ]]; then
        echo "FAIL: $(basename "$elf") needs $needed, which is neither packed nor the host's runtime or GPU stack" >&2
        exit 1
      fi
      unresolved+=("$needed")
    done < <(readelf -d "$elf" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
  done < <(find "$dir/libexec" "$dir/lib" -type f ! -name '*.sh')
  echo "left to the host besides the C/C++ runtime: $(printf '%s\n' "${unresolved[@]:-none}" | sort -u | tr '\n' ' ')"
}
