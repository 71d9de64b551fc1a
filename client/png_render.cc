#include "client/png_render.h"

#include <cmath>
#include <memory>

#include "absl/strings/str_cat.h"
#include "cairo.h"
#include "librsvg/rsvg.h"

namespace tpuemu {
namespace {

cairo_status_t AppendTo(void* out, const unsigned char* data, unsigned int length) {
  static_cast<std::string*>(out)->append(reinterpret_cast<const char*>(data), length);
  return CAIRO_STATUS_SUCCESS;
}

std::string TakeMessage(GError* error) {
  std::string message = error != nullptr ? error->message : "unknown error";
  if (error != nullptr) g_error_free(error);
  return message;
}

}  // namespace

absl::StatusOr<std::string> RenderPng(const std::string& svg, double scale) {
  GError* error = nullptr;
  std::unique_ptr<RsvgHandle, decltype(&g_object_unref)> handle(
      rsvg_handle_new_from_data(reinterpret_cast<const guint8*>(svg.data()), svg.size(), &error), &g_object_unref);
  if (handle == nullptr) return absl::InternalError(absl::StrCat("the chart's SVG did not parse: ", TakeMessage(error)));
  double width = 0, height = 0;
  if (!rsvg_handle_get_intrinsic_size_in_pixels(handle.get(), &width, &height) || width <= 0 || height <= 0) {
    return absl::InternalError("the chart's SVG has no width and height in pixels");
  }
  const int w = static_cast<int>(std::ceil(width * scale)), h = static_cast<int>(std::ceil(height * scale));
  std::unique_ptr<cairo_surface_t, decltype(&cairo_surface_destroy)> surface(
      cairo_image_surface_create(CAIRO_FORMAT_ARGB32, w, h), &cairo_surface_destroy);
  std::unique_ptr<cairo_t, decltype(&cairo_destroy)> cr(cairo_create(surface.get()), &cairo_destroy);
  // White, not transparent: a chart pasted on a dark page stays readable.
  cairo_set_source_rgb(cr.get(), 1, 1, 1);
  cairo_paint(cr.get());
  const RsvgRectangle viewport = {0, 0, static_cast<double>(w), static_cast<double>(h)};
  if (!rsvg_handle_render_document(handle.get(), cr.get(), &viewport, &error)) {
    return absl::InternalError(absl::StrCat("drawing the chart failed: ", TakeMessage(error)));
  }
  std::string png;
  if (cairo_surface_write_to_png_stream(surface.get(), &AppendTo, &png) != CAIRO_STATUS_SUCCESS) {
    return absl::InternalError("encoding the chart as PNG failed");
  }
  return png;
}

}  // namespace tpuemu
