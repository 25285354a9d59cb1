/* The process's cache of module images by SHA-256 (image_cache.c), in front of the tenant's
 * image store on disk: a module or library handle holds a reference to the image it was loaded
 * from. */
#ifndef SLUICE_BE_SESSION_IMAGE_CACHE_H
#define SLUICE_BE_SESSION_IMAGE_CACHE_H

struct be_image;
void be_image_unref(struct be_image *img);
void be_images_clear(void);

#endif
