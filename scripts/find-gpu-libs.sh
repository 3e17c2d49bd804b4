# Sourced (POSIX sh) by the GPU host bundle's wrappers and gpu-check: finds
# the CUDA 13 runtime and cuDNN 9 that the packed tools need, wherever the
# host keeps them, and puts their folders on LD_LIBRARY_PATH. Hosts with
# only a Python CUDA stack keep them in site-packages (the wheels
# nvidia-cuda-runtime and nvidia-cudnn: nvidia/*/lib), not /usr/local/cuda.
# Sets IOS_GPU_LIBS to "libcudart.so.13=PATH libcudnn.so.9=PATH" (PATH is
# "missing" for one not found); never fails: the tools say what is missing.

# Prints the first PATH/NAME found: LD_LIBRARY_PATH, the loader's cache, the
# usual CUDA folders, then every Python's site-packages.
ios_find_gpu_lib() {
  _name="$1"
  _old_ifs="$IFS"
  IFS=:
  for _dir in ${LD_LIBRARY_PATH:-}; do
    if [ -n "$_dir" ] && [ -e "$_dir/$_name" ]; then
      IFS="$_old_ifs"
      echo "$_dir/$_name"
      return 0
    fi
  done
  IFS="$_old_ifs"
  _cached="$(/sbin/ldconfig -p 2>/dev/null | awk -v n="$_name" '$1 == n { print $NF; exit }')"
  if [ -n "$_cached" ] && [ -e "$_cached" ]; then
    echo "$_cached"
    return 0
  fi
  for _path in /usr/local/cuda/lib64/"$_name" /usr/local/cuda/lib/"$_name" \
    /usr/local/cuda-*/lib64/"$_name" /usr/local/cuda-*/targets/*/lib/"$_name" \
    /usr/lib/x86_64-linux-gnu/"$_name" /usr/lib64/"$_name" /opt/conda/lib/"$_name"; do
    if [ -e "$_path" ]; then
      echo "$_path"
      return 0
    fi
  done
  for _python in ${PYTHON:-} python3 /usr/bin/python3 /usr/local/bin/python3; do
    command -v "$_python" >/dev/null 2>&1 || continue
    _sites="$("$_python" -c 'import site, sys
paths = [p for p in sys.path if p.endswith("-packages")]
try:
    paths += site.getsitepackages() + [site.getusersitepackages()]
except AttributeError:
    pass
print("\n".join(dict.fromkeys(paths)))' 2>/dev/null)" || continue
    for _site in $_sites; do
      for _path in "$_site"/nvidia/*/lib/"$_name" "$_site"/nvidia/*/lib64/"$_name" \
        "$_site"/torch/lib/"$_name"; do
        if [ -e "$_path" ]; then
          echo "$_path"
          return 0
        fi
      done
    done
  done
  return 1
}

IOS_GPU_LIBS=""
for _lib in libcudart.so.13 libcudnn.so.9; do
  if _found="$(ios_find_gpu_lib "$_lib")"; then
    _folder="$(dirname "$_found")"
    IOS_GPU_LIBS="$IOS_GPU_LIBS $_lib=$_found"
    case ":${LD_LIBRARY_PATH:-}:" in
      *":$_folder:"*) ;;
      *) LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$_folder" ;;
    esac
    # cuDNN 9 loads its engine libraries and cuBLAS(Lt) by name at run time:
    # a wheel keeps those in sibling nvidia/*/lib folders.
    case "$_folder" in
      */nvidia/*/lib)
        for _sibling in "${_folder%/*/lib}"/*/lib; do
          case ":$LD_LIBRARY_PATH:" in
            *":$_sibling:"*) ;;
            *) LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$_sibling" ;;
          esac
        done
        ;;
    esac
  else
    IOS_GPU_LIBS="$IOS_GPU_LIBS $_lib=missing"
  fi
done
IOS_GPU_LIBS="${IOS_GPU_LIBS# }"
export LD_LIBRARY_PATH IOS_GPU_LIBS
unset _lib _found _folder _sibling _name _dir _old_ifs _cached _path _python _sites _site
