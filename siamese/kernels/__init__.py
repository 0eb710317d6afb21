"""Optional native CPU kernels (built on first use with torch.utils.cpp_extension)."""
