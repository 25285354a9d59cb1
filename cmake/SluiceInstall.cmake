# Where `cmake --install` puts what the Debian packages ship (debian/, docs/deployment.md,
# "Debian packages"). The programs' own install() rules sit next to them; this file adds the
# rest: the backend, the guest libcuda.so.1, the systemd units, the example configurations and
# the helper files. With CMAKE_INSTALL_PREFIX=/usr (the packages): /usr/bin, /usr/sbin,
# /usr/lib/sluice, /usr/share/sluice, /etc/sluice and SLUICE_SYSTEMD_UNIT_DIR.
include(GNUInstallDirs)

# bookworm's debhelper installs units in /lib/systemd/system; debian/rules passes it.
set(SLUICE_SYSTEMD_UNIT_DIR "${CMAKE_INSTALL_PREFIX}/lib/systemd/system"
    CACHE PATH "where the systemd units are installed")

install(TARGETS sluice-backend RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

# The guest library has its own folder: it must never replace a real NVIDIA driver's
# libcuda.so.1 (the sluice-guest package adds the folder to ld.so.conf.d; docs/deployment.md).
# libcuda.so.1 and the libcuda.so link (programs that dlopen the unversioned name).
install(TARGETS sluice_cuda LIBRARY DESTINATION lib/sluice)
install(FILES ${CMAKE_SOURCE_DIR}/frontend/enroll/cloud-init.yaml DESTINATION share/sluice)

install(FILES ${CMAKE_SOURCE_DIR}/agent/systemd/sluice-agent.service
              ${CMAKE_SOURCE_DIR}/nova-hook/systemd/sluice-novahook.service
              ${CMAKE_SOURCE_DIR}/frontend/enroll/systemd/sluice-enroll.service
              ${CMAKE_SOURCE_DIR}/frontend/enroll/systemd/sluice-enroll.timer
              ${CMAKE_SOURCE_DIR}/frontend/enroll/systemd/sluice-config-drive.service
        DESTINATION ${SLUICE_SYSTEMD_UNIT_DIR})

install(FILES ${CMAKE_SOURCE_DIR}/agent/sluice-agent.conf.example
        DESTINATION ${CMAKE_INSTALL_FULL_SYSCONFDIR}/sluice RENAME agent.conf)
install(FILES ${CMAKE_SOURCE_DIR}/nova-hook/novahook.conf.example
        DESTINATION ${CMAKE_INSTALL_FULL_SYSCONFDIR}/sluice RENAME novahook.conf)

install(PROGRAMS ${CMAKE_SOURCE_DIR}/nova-hook/openstack/bootstrap-flavors.sh
        DESTINATION share/sluice)
install(FILES ${CMAKE_SOURCE_DIR}/nova-hook/openstack/nova.conf.fragment
              ${CMAKE_SOURCE_DIR}/nova-hook/openstack/provider.yaml.j2
        DESTINATION share/sluice)
